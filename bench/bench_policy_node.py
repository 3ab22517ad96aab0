"""Policy node latency bench: medians and p99 over >= 10 s, each printed against its goal.

    python bench/bench_policy_node.py [--seconds 12] [--runs 3] [--realtime-priority P] [--writer-spin S]
                                      [--receiver-cpu C] [--writer-cpu C]   (node parameters; default: its defaults)

Runs `bcg-policy-node` as its own process on loopback Cyclone DDS with an 849-input
[512, 256, 128] MLP policy (random weights, reference terms over 21 frames of a standing motion),
fed LowState at 500 Hz by this script, and reads the node's own measurements from its event log:
- LowState received (policy process) -> LowCmd with the new targets written (writer process),
  policy step included, goal <= 1 ms p99;
- 500 Hz writer: lateness of each periodic write after its deadline (period jitter), goal <= 0.3 ms p99;
- policy schedule: how far each interval between two policy steps is from the 20 ms period (no goal
  in the issue: reported; a step that slips to the next LowState shows as 2 ms);
- onnxruntime inference of the same MLP, measured here, against a 93 -> 256 -> 256 -> 29 MLP
  measured in the same run as the reference; and once more with one call every 20 ms, as the node
  calls it (on a shared machine its 2.4 MB of weights leave the caches in between: that, not the
  arithmetic, is most of the node's policy step).
"""
import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import onnx

from bcg.contract import (
    ObservationSpec,
    ObservationTerm,
    PolicyContract,
    load_policy,
    random_mlp,
    robot_state_spec,
    write_policy,
)
from bcg.robot import SDK_JOINT_NAMES, RobotDescription
from bcg.transport import TransportConfig, make_transport
from bcg.wire import new_lowstate
from bcg_policy_node.config import PolicyNodeConfig
from bcg_policy_node.entry.setup_node import build_controller

FRAMES = tuple(range(1, 22))
GOALS_MS = {"latency": 1.0, "writer_lateness": 0.3}
LABELS = {"latency": "LowState received -> LowCmd written",
          "writer_lateness": "500 Hz writer jitter (lateness after deadline)"}


def bench_contract(robot) -> PolicyContract:
    n, f = robot.num_joints, FRAMES
    spec = ObservationSpec(robot_state_spec(n).terms + (
        ObservationTerm("ref_joint_pos", n * len(f), 1.0, f), ObservationTerm("ref_root_height", len(f), 1.0, f),
        ObservationTerm("ref_root_rot", 6 * len(f), 1.0, f)))
    assert spec.size == 849, spec.size
    return PolicyContract(robot.joint_names, robot.kp, robot.kd, robot.default_q, np.full(n, 0.25), spec, 0.02,
                          300.0, "bench_stand", "bench: random 849-input [512, 256, 128] MLP")


def standing_motion(robot, path: Path, seconds: float = 60.0) -> None:
    rows = np.zeros((int(seconds * 30), 7 + len(SDK_JOINT_NAMES)))
    rows[:, 2], rows[:, 6] = 0.78, 1.0
    rows[:, 7 + robot.motor_slots] = robot.default_q
    np.savetxt(path, rows, delimiter=",", fmt="%.5f")


def call_ms(f, n=5000, gap_s=0.0):
    """Median and p99 (ms) of one call of `f()`: back to back (`gap_s` 0, caches warm), or one call
    every `gap_s` seconds as in the node, whose caches the rest of the machine has used in between."""
    for _ in range(200):
        f()
    times = []
    for _ in range(n):
        if gap_s:
            time.sleep(gap_s)
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return 1e3 * np.median(times), 1e3 * np.percentile(times, 99)


def inference_ms(policy, n=5000, gap_s=0.0):
    obs = np.random.default_rng(0).normal(size=policy.contract.observation.size).astype(np.float32)
    return call_ms(lambda: policy(obs), n, gap_s)


def observation_ms(robot, policy: Path, motion: Path):
    """The node's own observation build (`Controller.observation`) for the bench policy, warm."""
    controller = build_controller(PolicyNodeConfig(policy=str(policy), motion=str(motion)))
    state = new_lowstate()
    state["mode_machine"] = robot.mode_machine
    state["imu_state"]["quaternion"] = [1, 0, 0, 0]
    state["motor_state"]["q"][robot.motor_slots] = robot.default_q
    controller.on_state(state, 0.0)
    return call_ms(controller.observation)


def weight_mb(policy) -> float:
    """MB of float32 initializers (weights and biases) in the policy's ONNX file."""
    model = onnx.load(str(policy.path))
    return sum(np.prod(t.dims) for t in model.graph.initializer) * 4 / 1e6


def run_node(args, robot, policy: Path, motion: Path, tmp: Path, run: int) -> dict:
    """One node process fed 500 Hz LowState for `args.seconds` of policy; returns its summary."""
    params = tmp / f"params{run}.yaml"
    params.write_text("policy_node:\n  ros__parameters:\n    ramp_duration: 0.5\n    autostart_hold: 0.2\n"
                      f"    realtime_priority: {args.realtime_priority}\n    writer_spin: {args.writer_spin}\n"
                      f"    receiver_cpu: {args.receiver_cpu}\n    writer_cpu: {args.writer_cpu}\n")
    events = tmp / f"events{run}.jsonl"
    domain = args.domain + run
    transport = make_transport(TransportConfig.simulation(domain_id=domain, transport="dds"))
    writer = transport.lowstate_writer()
    state = new_lowstate()
    state["mode_machine"] = robot.mode_machine
    state["imu_state"]["quaternion"] = [1, 0, 0, 0]
    state["motor_state"]["q"][robot.motor_slots] = robot.default_q
    done = threading.Event()

    def publish():
        deadline = time.monotonic()
        tick = 0
        while not done.is_set():
            state["tick"] = tick
            writer.write(state)
            tick += 2
            deadline += 0.002
            time.sleep(max(0.0, deadline - time.monotonic()))
    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    node = subprocess.Popen([str(Path(sys.executable).with_name("bcg-policy-node")), "--params", str(params),
                             "--domain", str(domain), "--interface", "lo", "--autostart", "--policy", str(policy),
                             "--motion", str(motion), "--events", str(events)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    start = time.monotonic()
    while time.monotonic() - start < 60 and (not events.exists() or '"to": "policy"' not in events.read_text()):
        time.sleep(0.1)
    if '"to": "policy"' not in events.read_text():
        node.send_signal(signal.SIGINT)
        sys.exit(f"the node never reached the policy phase:\n{node.communicate(timeout=30)[0]}")
    time.sleep(args.seconds)
    node.send_signal(signal.SIGINT)
    out, _ = node.communicate(timeout=30)
    done.set()
    publisher.join()
    transport.close()
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    summary = next((x["summary"] for x in lines if "summary" in x), None)
    if summary is None or summary["latency"] is None:
        print(out)
        sys.exit("the node produced no measurements")
    return summary


def print_run(summary: dict, seconds: float) -> None:
    print(f"policy node bench: {summary['policy_steps']} policy steps, {summary['commands_written']} LowCmds, "
          f"{seconds:.0f} s of policy (node process + its LowCmd writer process, loopback DDS, 500 Hz LowState "
          f"from this script); scheduling: {summary['scheduling']}")
    for key, label in LABELS.items():
        s = summary[key]
        goal = GOALS_MS[key]
        verdict = "meets" if s["p99_ms"] <= goal else "MISSES"
        print(f"  {label:<48} median {s['median_ms']:.3f} ms  p99 {s['p99_ms']:.3f} ms  "
              f"goal p99 <= {goal} ms: {verdict} (p99/goal = {s['p99_ms'] / goal:.2f}, n = {s['n']})")
    for key, label in (("policy_step", "node policy step (observation + inference)"),
                       ("policy_period_error", "|policy step interval - 20 ms period|")):
        s = summary[key]
        print(f"  {label:<48} median {s['median_ms']:.3f} ms  p99 {s['p99_ms']:.3f} ms  max {s['max_ms']:.3f} ms")
    if summary.get("writer_fault"):
        print(f"  the writer damped on its own: {summary['writer_fault']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=12.0, help="seconds of policy phase to measure (>= 10)")
    ap.add_argument("--runs", type=int, default=1, help="node runs, one after the other (spread of the p99s)")
    ap.add_argument("--realtime-priority", type=int, default=PolicyNodeConfig.realtime_priority,
                    help="the node's realtime_priority parameter")
    ap.add_argument("--writer-spin", type=float, default=PolicyNodeConfig.writer_spin,
                    help="the node's writer_spin parameter, s")
    ap.add_argument("--receiver-cpu", type=int, default=PolicyNodeConfig.receiver_cpu,
                    help="the node's receiver_cpu parameter")
    ap.add_argument("--writer-cpu", type=int, default=PolicyNodeConfig.writer_cpu,
                    help="the node's writer_cpu parameter")
    ap.add_argument("--domain", type=int, default=69)
    args = ap.parse_args()
    robot = RobotDescription.load()
    tmp = Path(tempfile.mkdtemp(prefix="bcg_bench_"))
    contract = bench_contract(robot)
    big = write_policy(tmp / "mlp849.onnx", random_mlp(849, (512, 256, 128), robot.num_joints), contract)
    small_contract = PolicyContract(robot.joint_names, robot.kp, robot.kd, robot.default_q, np.full(29, 0.25),
                                    ObservationSpec((ObservationTerm("joint_pos", 29), ObservationTerm("joint_vel", 29),
                                                     ObservationTerm("last_action", 29),
                                                     ObservationTerm("base_ang_vel", 3),
                                                     ObservationTerm("projected_gravity", 3))), 0.02, 0.0, "", "ref")
    small = write_policy(tmp / "mlp_ref.onnx", random_mlp(93, (256, 256), 29), small_contract)
    motion = tmp / "stand.csv"
    standing_motion(robot, motion)
    summaries = []
    for run in range(args.runs):
        summaries.append(run_node(args, robot, big, motion, tmp, run))
        print_run(summaries[-1], args.seconds)
    if args.runs > 1:
        for key, label in LABELS.items():
            p99 = [s[key]["p99_ms"] for s in summaries]
            print(f"  spread over {args.runs} runs, {label}: p99 {min(p99):.3f} .. {max(p99):.3f} ms "
                  f"(goal {GOALS_MS[key]} ms; met in {sum(x <= GOALS_MS[key] for x in p99)} of {args.runs})")
    big, small = load_policy(big), load_policy(small)
    big_med, big_p99 = inference_ms(big)
    ref_med, ref_p99 = inference_ms(small)
    print(f"  {'onnxruntime 849 -> [512, 256, 128] -> 29 MLP':<48} median {big_med:.3f} ms  p99 {big_p99:.3f} ms  "
          f"(x{big_med / ref_med:.1f} the reference 93 -> [256, 256] -> 29 MLP: median {ref_med:.3f} ms)")
    obs_med, obs_p99 = observation_ms(robot, big.path, motion)
    print(f"  {'node observation build (849 values, warm)':<48} median {obs_med:.3f} ms  p99 {obs_p99:.3f} ms")
    cold_med, cold_p99 = inference_ms(big, n=300, gap_s=0.02)
    print(f"  {'  the same, one call every 20 ms (as the node)':<48} median {cold_med:.3f} ms  p99 {cold_p99:.3f} ms  "
          f"(x{cold_med / big_med:.1f} back to back: the weights, {weight_mb(big):.1f} MB, leave the caches)")


if __name__ == "__main__":
    main()
