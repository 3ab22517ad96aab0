"""Runs the policy node over an open transport until it is stopped (the direct-DDS and ROS 2 entry points).

Not imported by `main` until the arguments are checked: the LowCmd writer process is started with
multiprocessing's 'spawn', which re-imports the entry script, and that should stay cheap.
"""
import dataclasses
import gc
import logging
import signal

from bcg.robot.pd_stability import PdPath
from bcg.transport import make_transport
from bcg.transport.endpoint import Endpoint

from ..config import LOGGER_NAME
from ..core.joint_map import JointMapError
from ..realtime.command_writer import WriterSettings
from ..realtime.runtime import EventLog, NodeRuntime
from .exit_codes import EXIT_REFUSED
from .setup_node import WRITER_NODE_NAME, StartupError, build_controller

log = logging.getLogger(LOGGER_NAME)
SIGNAL_POLL_S = 0.02
"""s between the main thread's checks for a stop signal (damping starts at most this late)."""


def record_stop_signals(requests: list) -> None:
    """SIGINT / SIGTERM append their name to `requests` and do nothing else. A handler runs in the
    main thread between two of its bytecodes, possibly while it holds the runtime's lock (in
    `stop()` or `join()`): taking that lock in the handler could deadlock, a second signal included."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, f: requests.append(signal.Signals(s).name))


def run(config, endpoint: Endpoint, open_transport=None) -> int:
    """Run the node until stopped; returns the exit code. `open_transport()`: default the endpoint's
    (LowState side; the LowCmd writer process opens its own, as node `WRITER_NODE_NAME` on ROS 2)."""
    for note in endpoint.notes:
        log.info("%s", note)
    events = EventLog(config.events)
    try:
        controller = build_controller(config, on_transition=events.transition)
    except StartupError as e:
        log.error("refusing to start: %s", e)
        events.close()
        return EXIT_REFUSED
    writer = WriterSettings(dataclasses.replace(endpoint.transport, node_name=WRITER_NODE_NAME),
                            writer_hz=config.writer_hz, spin_s=config.writer_spin,
                            realtime_priority=config.realtime_priority + 1 if config.realtime_priority else 0,
                            cpu=config.writer_cpu, shutdown_damping_s=config.shutdown_damping)
    with (open_transport or (lambda: make_transport(endpoint.transport)))() as transport:
        t = endpoint.transport
        interface = t.interface or "of Cyclone's choice"
        where = f"domain {t.domain_id}, interface {interface} ({'ROS 2 /lowstate' if endpoint.ros else 'rt/lowstate'})"
        runtime = NodeRuntime(controller, transport, writer, check_state_crc=config.check_state_crc,
                              receiver_priority=config.realtime_priority, receiver_cpu=config.receiver_cpu,
                              pd_path=PdPath(config.pd_step, config.pd_delay_steps), where=where,
                              lockstep=config.lockstep,
                              state_clock_s=config.pd_step if config.lowstate_clock and not config.lockstep else None)
        requests = []
        record_stop_signals(requests)
        gc.collect()
        gc.freeze()              # everything built so far: never scanned again by the collector
        try:
            runtime.start()
            log.info("policy %s: %d joints, %.0f Hz policy, %s, domain %d", controller.policy.path,
                     controller.contract.num_joints, controller.contract.control_hz,
                     "lockstep (simulated time: one LowCmd per LowState)" if config.lockstep else
                     f"{config.writer_hz:.0f} Hz writer (own process)"
                     + (f", phase clock {config.pd_step:g} s per fresh LowState"
                        if config.lowstate_clock and not config.lockstep else ""),
                     config.domain)
            while not runtime.wait(SIGNAL_POLL_S):
                if requests:
                    runtime.stop(f"stop requested ({requests[0]})")
        except RuntimeError as e:         # the writer process could not start
            runtime.error = runtime.error or e
            log.error("%s", e)
        finally:
            runtime.join()
        summary = runtime.summary()
        events.write({"summary": summary})
        events.close()
    if isinstance(runtime.error, JointMapError):
        log.error("refusing to run: %s", runtime.error)
        return EXIT_REFUSED
    if runtime.error is not None:
        return 1
    log.info("stopped: %d commands written, %d policy steps, %d LowStates received, dropped: %s",
             summary["commands_written"], summary["policy_steps"], summary["states_received"], runtime.drops)
    return 0
