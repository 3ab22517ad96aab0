"""Benchmark of the sim bridge: achieved real-time factor in --fast mode beside raw mj_step.

Runs the bridge in this process, pinned to one core, with Cyclone DDS publishing LowState at
500 Hz of simulated time to a subscriber in a child process (on another core when there is one),
polling LowCmd every physics step. Then steps the same physics (same model, timestep, initial
state and damping command) with bare `mj_step` calls on the same core. Prints both rates and
their ratio; the goal is a real-time factor >= 3.

    python bench/bench_bridge.py [--duration 10] [--domain 49] [--model PATH]
"""
import argparse
import os
import subprocess
import sys
import time

SUBSCRIBER = """
import signal, sys, threading
from bcg.transport import TransportConfig, make_transport
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
with make_transport(TransportConfig.simulation(int(sys.argv[1]), transport="dds")) as t:
    r = t.lowstate_reader(check_crc=True)
    n = 0
    while not stop.is_set():
        n += r.wait(0.2) is not None
    print(n, "/", r.dropped["crc"], flush=True)
"""


def pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds per measurement")
    parser.add_argument("--domain", type=int, default=49)
    parser.add_argument("--model", default=None, help="G1 scene XML (default $BCG_G1_MODEL)")
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    bench_core = cores[0]

    import mujoco

    from bcg.mujoco_plant import PhysicsCore
    from bcg.robot import RobotDescription
    from bcg.transport import make_transport
    from bcg.transport.endpoint import transport_settings
    from bcg_sim_bridge.bridge import SimBridge
    from bcg_sim_bridge.config import NODE_NAME, BridgeConfig
    from bcg_sim_bridge.runner import COMMAND_HISTORY

    robot = RobotDescription.load(args.model)
    config = BridgeConfig(model=str(robot.model_path), domain=args.domain, fast=True, duration=args.duration,
                          wait_for_command=0.0, headless=True)
    sub = subprocess.Popen([sys.executable, "-c", SUBSCRIBER, str(args.domain)], stdout=subprocess.PIPE, text=True,
                           preexec_fn=(lambda: pin(cores[-1])) if len(cores) > 1 else None)
    pin(bench_core)
    with make_transport(transport_settings("dds", config.domain, config.interface, NODE_NAME)) as transport:
        bridge = SimBridge(config, robot, transport.lowcmd_reader(check_crc=False, depth=COMMAND_HISTORY),
                           transport.lowstate_writer())
        time.sleep(2.0)  # let the subscriber be discovered
        bridge.run()
    sub.terminate()
    received = sub.communicate(timeout=30)[0].strip() or "(subscriber ended early)"
    report = bridge.report()

    core = PhysicsCore(robot, config.physics_hz, config.initial_pose)
    core.apply(bridge.gate.damping)
    steps = report["physics_steps"]
    start = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(core.model, core.data)
    raw_wall = time.perf_counter() - start

    bridge_rate = steps / report["wall_time_s"]
    raw_rate = steps / raw_wall
    print(f"model {robot.model_path.name}: {robot.num_joints} joints, physics {config.physics_hz:g} Hz, "
          f"LowState {config.state_hz:g} Hz over DDS, {args.duration:g} s simulated, core {bench_core}")
    print(f"bridge --fast : {bridge_rate:9.0f} steps/s  real-time factor {report['real_time_factor']:.2f}x "
          f"({report['states_published']} LowState published; subscriber got / crc errors: {received})")
    print(f"raw mj_step   : {raw_rate:9.0f} steps/s  real-time factor {raw_rate * core.dt:.2f}x")
    print(f"bridge / raw  : {bridge_rate / raw_rate:.2f}   (goal: bridge real-time factor >= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
