"""The node's threads and processes around `Controller`.

- receiver thread (this process): blocks on the transport's LowState reader; every sample goes
  through the safety checks and the remote, and its arrival time is published for the writer's
  staleness watchdog. The policy runs here, on a deadline schedule at the contract's period: on
  the LowState nearest each deadline (`PolicySchedule`; next deadline = previous + period) it builds the
  observation, runs the policy, publishes the new targets and wakes the writer, which sends them
  at once (the "LowState received -> LowCmd written" latency the bench measures). Only then does
  it prepare the next step's reference-motion samples. Without LowState it checks staleness every
  `IDLE_CHECK_S`, and says so every few seconds while none has arrived since the start
  (`SilenceWatch`). Every LowState dropped (by the reader: CRC, malformed; by the controller before
  any motion: not finite, robot not ready) is counted by reason and reported (`LOWSTATE_DROPS`):
  the first of each reason at once, then a summary every few seconds (at once when the phase
  changes, so that it is never read as news of the new phase), the totals in the stop summary.
  Once enough LowStates have come to know their interval, a simulator stepping slower than the
  declared PD path is named (`gains.pd_step_warning`).
- lockstep (simulation with this suite's bridge in lockstep): the controller's clock is the
  LowState's tick (simulated time), nothing else is timed on the wall clock, and every LowState wakes
  the writer, which answers it with exactly one LowCmd echoing its tick. The one wall-clock limit:
  no LowState for `LOCKSTEP_SILENCE_S` means the simulator stopped (killed, crashed): the node
  damps (`check_lockstep_silence`), and the writer leaves lockstep to publish that damping on its
  500 Hz schedule, as on the robot.
- LowState clock (`state_clock_s`: simulation against a simulator that sends no tick): the
  controller's clock advances by `state_clock_s` for every fresh LowState (`LowStateClock`), so the
  ramp, hold, blend and policy schedule follow simulated time when the simulator runs slower than
  real time; the writer keeps its 500 Hz schedule and composes at that clock's newest time, and
  staleness stays on the wall clock (the writer's check; the receiver's while none arrives).
- LowCmd writer process (`command_writer`): the 500 Hz deadline schedule, in its own process so
  that the policy step never delays it; fed through the shared command plan (`shared_plan`).
- monitor thread (this process): turns the writer's reports into controller faults (logged, phase
  DAMPING) and notices when the writer ends. When it ends without its summary (it crashed, or was
  killed), this process damps in its place for `shutdown_damping` through a LowCmd writer of its
  own, opened at start so that the robot has already matched it.

`stop()` (stop, SIGINT, SIGTERM) switches to damping; the writer keeps writing it for
`shutdown_damping` s, then ends, and so does the node.
"""
import dataclasses
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np

from bcg.robot.pd_stability import PdPath
from bcg.transport.drop_log import DropLog

from ..config import LOGGER_NAME
from ..core.command_plan import LowCmdComposer, new_plan
from ..core.controller import Controller
from ..core.gains import pd_step_warning
from ..core.safety import check_lockstep_silence, check_stale
from ..core.silence import SilenceWatch
from ..core.state_clock import LowStateClock
from ..core.state_machine import Phase, Transition
from .command_writer import WriterSettings, writer_main
from .scheduling import PolicySchedule, request_cpu, request_fifo
from .shared_plan import SharedPlan
from .timing_stats import TimingStats

log = logging.getLogger(LOGGER_NAME)
IDLE_CHECK_S = 0.005
"""s between staleness checks of the receiver while no LowState arrives."""
WRITER_START_TIMEOUT_S = 60.0
"""s the writer process may take to start (a Python interpreter, numpy, the transport)."""
WRITER_EXIT_GRACE_S = 3.0
"""s the writer gets to end on its own after its stop time before it is killed."""
WRITER_DIED_REASON = "LowCmd writer process died"
LOWSTATE_DROPS = {
    "crc": "CRC mismatch (a simulator that sends crc 0? set check_state_crc: false, or --no-state-crc)",
    "malformed": "malformed (wrong size or encoding: not a unitree_hg LowState?)",
    "non_finite": "non-finite values before anything was commanded",
    "not_ready": "robot not ready (zero or non-unit IMU quaternion, or every joint at 0 with tick 0: a simulator "
                 "before its first physics step?); nothing is commanded on such a LowState",
}
"""Why a LowState is dropped (the reader's `DROP_REASONS`, the controller's `STATE_DROP_REASONS`), and what to do."""
LOCKSTEP_SILENCE_S = 10.0
"""Wall s without a LowState in lockstep before the node damps: the bridge's own wait for an answer
(`bcg_sim_bridge.config.LOCKSTEP_TIMEOUT_S`), far beyond a state period on a loaded machine."""
STEP_CHECK_STATES = 25
"""LowStates after which their interval is compared with the declared PD step (once)."""


def tick_seconds(state: np.void) -> float:
    """s of simulated time of a LowState (its `tick`, ms): the node's clock in lockstep."""
    return int(state["tick"]) * 1e-3


class EventLog:
    """JSON lines: one per phase transition, flushed at once, and a summary at exit."""

    def __init__(self, path: Optional[str]):
        self.file = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.file = open(path, "w", buffering=1)

    def write(self, record: dict) -> None:
        if self.file is not None:
            self.file.write(json.dumps(record) + "\n")

    def transition(self, t: Transition, state_tick_ms: Optional[int]) -> None:
        """Log `t` with the tick (ms) of the newest LowState (simulated time in simulation)."""
        self.write({"transition": {**t.to_json(), "state_tick_ms": state_tick_ms}})

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class NodeRuntime:
    """Runs a `Controller`: LowState from `transport`, LowCmd from a writer process per `writer`.

    `receiver_priority`: SCHED_FIFO priority of the receiver thread (best effort; 0: normal);
    `receiver_cpu`: the CPU it is pinned to (best effort; -1: any). `pd_path`: the PD path declared
    (checked against the LowState interval); `where`: the endpoint in words (for the silence notice);
    `lockstep`: simulated time from the LowState ticks; `state_clock_s`: the controller's clock
    advances by this much per fresh LowState, None: monotonic (module docstring).
    """

    def __init__(self, controller: Controller, transport, writer: WriterSettings, check_state_crc: bool = True,
                 receiver_priority: int = 0, receiver_cpu: int = -1, pd_path: Optional[PdPath] = None,
                 where: str = "", lockstep: bool = False, state_clock_s: Optional[float] = None):
        self.controller = controller
        self.pd_path, self.lockstep = pd_path, lockstep
        self.state_clock = None if state_clock_s is None else LowStateClock(state_clock_s)
        self.silence = SilenceWatch(where or transport.kind, time.monotonic())
        self._step_checked = pd_path is None
        self.reader = transport.lowstate_reader(check_crc=check_state_crc)
        self.standby_writer = transport.lowcmd_writer()
        """Writes nothing unless the writer process dies: then damping, for `shutdown_damping_s`."""
        self.writer_settings = dataclasses.replace(writer, parent_pid=os.getpid())
        self.receiver_priority, self.receiver_cpu = receiver_priority, receiver_cpu
        self.lock = threading.Lock()
        """Guards the controller and the plan: receiver, monitor and stop() all change them."""
        self.plan = new_plan()
        self.plan["lockstep"] = lockstep
        self.plan["state_clock"] = self.state_clock is not None
        self._published = (-1, -1)
        """(plan_version, targets_version) of the controller last written into `plan`."""
        self.stop_at: Optional[float] = None
        self.done = threading.Event()
        self.error: Optional[BaseException] = None
        self.states_received = 0
        self.drops = DropLog("LowState", LOWSTATE_DROPS)
        self.policy_step_time = TimingStats()
        """Observation + inference + targets of each policy step, s."""
        self.policy_period_error = TimingStats()
        """|time between two consecutive policy steps - the contract's period|, s."""
        self._last_step: Optional[float] = None
        self._state_wall: Optional[float] = None
        """Monotonic s of the newest LowState (None before any)."""
        self.scheduling = {}
        """Which scheduling each time-critical thread got (notes for the log and the summary)."""
        self.writer_summary: Optional[dict] = None
        self._writer_error = ""
        ctx = multiprocessing.get_context("spawn")
        self.shared = SharedPlan.create(ctx)
        self.shared.publish(self.plan)            # inactive, no stop time: what the writer first reads
        self._conn, self._child_conn = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=writer_main, name="bcg-lowcmd-writer",
                                    args=(self.writer_settings, self.shared.handles(), self._child_conn))
        self._threads = [threading.Thread(target=self._guard(f), name=f.__name__, daemon=True)
                         for f in (self._receive_loop, self._monitor_loop)]

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer process (wait until it is ready), then the receiver and the monitor."""
        blocked = {signal.SIGINT, signal.SIGTERM}
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)   # the child inherits the mask
        try:
            self._process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        self._child_conn.close()
        if not self._conn.poll(WRITER_START_TIMEOUT_S):
            raise RuntimeError(f"LowCmd writer process did not start within {WRITER_START_TIMEOUT_S:g} s")
        try:
            kind, payload = self._conn.recv()
        except EOFError:
            kind, payload = "error", f"exit code {self._process.exitcode}"
        if kind != "ready":
            raise RuntimeError(f"LowCmd writer process failed to start: {payload}")
        self.scheduling["writer"] = payload
        log.info("LowCmd writer process: %s", payload)
        for t in self._threads:
            t.start()

    def stop(self, reason: str = "stop requested") -> None:
        """Switch to damping and end after `shutdown_damping_s` (at once if nothing was ever sent)."""
        with self.lock:
            if self.stop_at is not None:
                return
            c = self.controller
            now = time.monotonic()
            nothing_sent = c.machine.phase is Phase.WAIT or c.mode_machine is None
            c.fault(self._controller_now(), reason)
            self.stop_at = now if nothing_sent else now + self.writer_settings.shutdown_damping_s
            self.plan["stop_at"] = self.stop_at
            self._publish()
        self.shared.wake_writer()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the node ended (True) or `timeout` passed (False)."""
        return self.done.wait(timeout)

    def join(self) -> None:
        """End everything (stopping first if needed) and wait for it; kills a writer that hangs."""
        if self._process.is_alive():
            self.stop("node shutting down")
            self._process.join(self.writer_settings.shutdown_damping_s + WRITER_EXIT_GRACE_S)
            if self._process.is_alive():
                log.error("LowCmd writer process did not end; killing it")
                self._process.kill()
        self.done.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=2.0)
        self._report_drops(time.monotonic(), flush=True)

    def _controller_now(self) -> float:
        """The controller's time now: monotonic, or in lockstep the newest LowState's (0 before any)."""
        if self.state_clock is not None:
            return self.state_clock.now if self.state_clock.now is not None else 0.0
        if not self.lockstep:
            return time.monotonic()
        t = self.controller.state_time
        return t if np.isfinite(t) else 0.0

    def _report_drops(self, now: float, flush: bool = False) -> None:
        """Log what `drops` has to say about the reader's and the controller's counters at `now`
        (monotonic); `flush`: the pending ones at once (the phase changed, or the node stops)."""
        line = self.drops.update({**self.reader.dropped, **self.controller.dropped}, now, flush)
        if line is not None:
            log.warning("%s", line)

    def _report_silence(self, now: float, arrived: bool) -> None:
        """Say so while no LowState (valid or dropped) has arrived since the start."""
        line = self.silence.update(now, arrived or any(self.reader.dropped.values()))
        if line is not None:
            log.warning("%s", line)

    def _check_step(self, interval_s: float) -> None:
        """Once, after STEP_CHECK_STATES LowStates: warn when they show a simulator stepping slower
        than the declared PD path (`pd_step_warning`)."""
        if self._step_checked or self.states_received < STEP_CHECK_STATES or interval_s <= 0:
            return
        self._step_checked = True
        note = pd_step_warning(interval_s, self.controller.robot, self.pd_path)
        if note is not None:
            log.warning("%s", note)

    # -- threads ---------------------------------------------------------------------------
    def _guard(self, loop):
        def run():
            try:
                loop()
            except BaseException as e:  # a thread that dies must end the node, loudly
                self._fail(e)
                log.error("%s failed: %s: %s", loop.__name__, type(e).__name__, e)
                self.stop(f"{loop.__name__} failed")
        return run

    def _fail(self, error: BaseException) -> None:
        self.error = self.error or error

    def _publish(self) -> None:
        """The newest LowState time and, when it changed, the controller's plan -> shared memory (lock held).

        `self.plan` always holds everything: a publish that finds the shared lock busy is made good by
        the next one (every LowState, or every `IDLE_CHECK_S`)."""
        c = self.controller
        if self.state_clock is None:
            self.plan["state_time"] = c.state_time
        else:                                   # staleness on the wall clock, the ramp on the LowState clock
            self.plan["state_time"] = -np.inf if self._state_wall is None else self._state_wall
            self.plan["clock_time"] = self._controller_now()
        if c.plan_version != self._published[0]:
            c.write_plan(self.plan)
        elif c.targets_version != self._published[1]:
            c.write_targets(self.plan)
        self._published = (c.plan_version, c.targets_version)
        self.shared.publish(self.plan)

    def _receive_loop(self) -> None:
        self.scheduling["receiver"] = f"{request_fifo(self.receiver_priority)}, {request_cpu(self.receiver_cpu)}"
        log.info("LowState receiver: %s", self.scheduling["receiver"])
        c = self.controller
        schedule = PolicySchedule(c.contract.control_period_s)
        while not self.done.is_set():
            state = self.reader.wait(IDLE_CHECK_S)
            wall = time.monotonic()
            with self.lock:
                new_targets, version = False, c.plan_version
                if state is None:
                    self._on_silence(wall)
                else:
                    new_targets = self._on_state(state, wall, schedule)
                self._publish()
                if new_targets or (self.lockstep and state is not None):
                    self.shared.wake_writer()
                if new_targets:
                    c.prepare_next_step()
            self._report_silence(wall, state is not None)
            self._report_drops(wall, flush=c.plan_version != version)

    def _on_silence(self, wall: float) -> None:
        """Lock held, no LowState for `IDLE_CHECK_S`: the staleness check on the wall clock (LowState
        clock), the controller's tick (wall clock), or the lockstep silence check."""
        if self.state_clock is not None:
            self._check_stale_on_the_wall(wall)
        elif not self.lockstep:          # simulated time stands still between two LowStates
            self.controller.tick(wall)
        elif self._state_wall is not None and self.plan["lockstep"]:
            self._check_lockstep_silence(wall - self._state_wall)

    def _on_state(self, state, wall: float, schedule: PolicySchedule) -> bool:
        """Lock held: a LowState arrived at wall time `wall`; the controller takes it at the node's clock
        and the policy steps when the schedule says. Whether it computed new targets."""
        self._state_wall = wall
        if self.state_clock is not None:
            now = self.state_clock.on_state(state)
        else:
            now = tick_seconds(state) if self.lockstep else wall
        self.controller.on_state(state, now)
        self.states_received += 1
        self.plan["state_tick"] = state["tick"]
        new_targets = False
        if schedule.arrival(now) and self.stop_at is None:
            new_targets = self._policy_step(now, wall, schedule)
        self._check_step(schedule.state_interval_s)
        return new_targets

    def _policy_step(self, now: float, wall: float, schedule: PolicySchedule) -> bool:
        """The policy's step at the node's time `now` (its LowState arrived at wall time `wall`), timed;
        whether it computed new targets."""
        t0 = time.perf_counter()
        new_targets = self.controller.policy_step(now)
        if new_targets:
            self.policy_step_time.add(time.perf_counter() - t0)
            if self._last_step is not None:
                self.policy_period_error.add(abs(now - self._last_step - schedule.period_s))
            self._last_step = now
            self.plan["targets_seq"] += 1
            self.plan["targets_state_time"] = wall
        schedule.stepped(now)
        return new_targets

    def _check_stale_on_the_wall(self, wall: float) -> None:
        """LowState clock, lock held, no LowState: that clock stands still, so staleness is judged on
        the wall clock since the newest LowState's arrival (the writer judges it so too)."""
        c = self.controller
        if self._state_wall is None or c.machine.phase in (Phase.WAIT, Phase.DAMPING):
            return
        reason = check_stale(wall - self._state_wall, c.stale_after_s)
        if reason is not None:
            c.fault(self._controller_now(), reason)

    def _check_lockstep_silence(self, silent_s: float) -> None:
        """Lockstep, lock held: damp once the simulator has been silent too long, and let the writer
        publish that damping on its own schedule (the plan leaves lockstep)."""
        reason = check_lockstep_silence(silent_s, LOCKSTEP_SILENCE_S)
        if reason is not None:
            log.error("%s", reason)
            self.controller.fault(self._controller_now(), reason)
            self.plan["lockstep"] = False

    def _monitor_loop(self) -> None:
        while self.writer_summary is None:
            try:
                kind, payload = self._conn.recv()
            except EOFError:       # the writer process has ended without its summary
                break
            if kind == "fault":
                with self.lock:
                    self.controller.fault(self._controller_now(), payload)
                    self._publish()
            elif kind == "summary":
                self.writer_summary = payload
            elif kind == "error":
                self._writer_error = payload
        self._process.join(WRITER_EXIT_GRACE_S)   # its last LowCmd is sent: only its teardown is left
        if self._process.is_alive():
            log.warning("LowCmd writer process still tearing down after %g s; killing it", WRITER_EXIT_GRACE_S)
            self._process.kill()
            self._process.join()
        elif self.writer_summary is None:
            self._fail(RuntimeError(f"LowCmd writer process ended with exit code {self._process.exitcode}: "
                                    f"{self._writer_error or 'no summary'}"))
            log.error("%s", self.error)
            self._damp_in_place_of_the_writer()
        self.done.set()

    def _damp_in_place_of_the_writer(self) -> None:
        """The writer process is gone: publish damping from this process at the writer's rate for
        `shutdown_damping_s` (nothing when nothing was ever sent)."""
        with self.lock:
            c = self.controller
            c.fault(self._controller_now(), WRITER_DIED_REASON)
            c.write_plan(self.plan)
            plan = self.plan.copy()
        if not plan["active"]:
            return
        composer, period = LowCmdComposer(), 1.0 / self.writer_settings.writer_hz
        deadline = time.monotonic()
        end = deadline + self.writer_settings.shutdown_damping_s
        log.warning("damping from the policy process for %g s", self.writer_settings.shutdown_damping_s)
        while deadline <= end:
            composer.compose(plan, deadline, damping=True)
            try:
                self.standby_writer.write(composer.cmd)
            except Exception as e:      # keep trying: damping is all that is left
                log.error("damping LowCmd not sent: %s: %s", type(e).__name__, e)
            deadline += period
            time.sleep(max(0.0, deadline - time.monotonic()))

    def summary(self) -> dict:
        w = self.writer_summary or {}
        c = self.controller
        return {"commands_written": w.get("commands_written", 0), "commands_woken": w.get("commands_woken", 0),
                "lockstep": self.lockstep, "policy_steps": c.policy_steps, "start_deviation": c.start_deviation,
                "states_received": self.states_received, "states_dropped": dict(self.drops.totals),
                "final_phase": c.machine.phase.value,
                "latency": w.get("latency"), "writer_lateness": w.get("writer_lateness"),
                "policy_step": self.policy_step_time.summary(),
                "policy_period_error": self.policy_period_error.summary(), "writer_fault": w.get("writer_fault"),
                "scheduling": self.scheduling}
