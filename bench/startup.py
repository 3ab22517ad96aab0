"""Start-up times of the command lines and of the policy node, against Python's own in the same run.

    python bench/startup.py [--repeats 5] [--domain 97]

Every command runs `repeats` times as a fresh process; each figure is the median:
- the reference: `python -c pass` and `python -c "import numpy"` (this machine's start-up and its
  load right now: the ratios against numpy's are what compares across machines and loads);
- `bcg-train --help`, `bcg-eval --help`, `bcg-screen --help`, `bcg-ship --help`: goal <= 1 s;
- the policy node's first command: `bcg-policy-node` (the built-in stand policy) on loopback Cyclone
  DDS in a private domain, fed LowState at 500 Hz by this script: seconds from starting the process
  to the first LowCmd read here; goal <= 2 s on an idle machine.
Beside each wall time, the CPU time the command's processes used (for the node: it and its LowCmd
writer up to the first command): on a busy machine, what the wall time would be on an idle one.

Last line: train_help_s=... eval_help_s=... node_first_command_s=..., then each over the numpy
reference (`*_x_numpy`).
"""
import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

BIN = Path(sys.executable).parent
REFERENCE = {"python_s": [sys.executable, "-c", "pass"], "numpy_s": [sys.executable, "-c", "import numpy"]}
HELP = {f"{name}_help_s": [str(BIN / f"bcg-{name}"), "--help"] for name in ("train", "eval", "screen", "ship")}
NODE_KEY = "node_first_command_s"
GOALS_S = {**{key: 1.0 for key in HELP}, NODE_KEY: 2.0}
LAST_LINE_KEYS = ("train_help_s", "eval_help_s", NODE_KEY)
RATIO_TO = "numpy_s"
NODE_PARAMS = "policy_node:\n  ros__parameters:\n    shutdown_damping: 0.1\n"
"""The node's parameters here: a short damping at the stop (each run ends sooner)."""
FIRST_COMMAND_TIMEOUT_S = 60.0

Timing = Tuple[float, float]
"""(wall seconds, CPU seconds)."""


def medians(run: Callable[[], Timing], repeats: int) -> Timing:
    """Median wall and median CPU seconds of `repeats` calls of `run()`."""
    timings = [run() for _ in range(repeats)]
    return statistics.median(t[0] for t in timings), statistics.median(t[1] for t in timings)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_timing(cmd: Sequence[str]) -> Timing:
    """Wall and CPU seconds of one run of `cmd` (its output discarded); SystemExit when it fails."""
    cpu, t0 = children_cpu_s(), time.perf_counter()
    proc = subprocess.run(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr}")
    return wall, children_cpu_s() - cpu


def process_tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process `pid` and its children (Linux /proc)."""
    children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]
    ticks = 0
    for p in [pid, *children]:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])          # utime and stime: stat's fields 14 and 15
    return ticks / os.sysconf("SC_CLK_TCK")


def node_first_command(domain: int, folder: Path) -> Timing:
    """Wall seconds from starting `bcg-policy-node` to its first LowCmd on `domain` (loopback DDS), fed
    500 Hz LowState from a thread of this process, and the CPU seconds its processes used until
    then; the node is stopped (SIGINT) afterwards."""
    from bcg.robot import RobotDescription
    from bcg.transport import TransportConfig, make_transport
    from bcg.wire import new_lowstate

    robot = RobotDescription.load()
    state = new_lowstate()
    state["mode_machine"] = robot.mode_machine
    state["imu_state"]["quaternion"] = [1, 0, 0, 0]
    state["motor_state"]["q"][robot.motor_slots] = robot.default_q
    params = folder / "policy_node.yaml"
    params.write_text(NODE_PARAMS)
    done = threading.Event()
    with make_transport(TransportConfig.simulation(domain_id=domain, transport="dds")) as transport:
        reader, writer = transport.lowcmd_reader(check_crc=True), transport.lowstate_writer()

        def publish():
            deadline = time.monotonic()
            while not done.is_set():
                writer.write(state)
                deadline += 0.002
                time.sleep(max(0.0, deadline - time.monotonic()))
        publisher = threading.Thread(target=publish, daemon=True)
        publisher.start()
        t0 = time.monotonic()
        node = subprocess.Popen([str(BIN / "bcg-policy-node"), "--params", str(params), "--domain", str(domain),
                                 "--interface", "lo"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            first = None
            while first is None and node.poll() is None and time.monotonic() - t0 < FIRST_COMMAND_TIMEOUT_S:
                first = reader.wait(0.005)
            wall = time.monotonic() - t0
            cpu = process_tree_cpu_s(node.pid) if first is not None else float("nan")
        finally:
            node.send_signal(signal.SIGINT)
            out, _ = node.communicate(timeout=30)
            done.set()
            publisher.join()
    if first is None:
        raise SystemExit(f"the node sent no LowCmd (exit {node.returncode}):\n{out}")
    return wall, cpu


def result_line(times: Dict[str, float], keys: Sequence[str] = LAST_LINE_KEYS, ratio_to: str = RATIO_TO) -> str:
    """`key=seconds ...` for `keys`, then `<key without _s>_x_<reference without _s>=ratio ...`: each
    over `times[ratio_to]`."""
    reference = ratio_to.removesuffix("_s")
    return " ".join([f"{key}={times[key]:.3f}" for key in keys]
                    + [f"{key.removesuffix('_s')}_x_{reference}={times[key] / times[ratio_to]:.1f}" for key in keys])


def report_lines(timings: Dict[str, Timing]) -> List[str]:
    """One line per command: wall seconds, its ratio to the reference's, CPU seconds, and its goal
    where it has one."""
    reference = timings[RATIO_TO][0]
    lines = []
    for key, (wall, cpu) in timings.items():
        goal = GOALS_S.get(key)
        verdict = "" if goal is None else f"  goal <= {goal:g} s: {'meets' if wall <= goal else 'MISSES'}"
        lines.append(f"  {key:<22} {wall:7.3f} s  x{wall / reference:5.1f} numpy's  cpu {cpu:6.3f} s{verdict}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="runs of each command (the median is reported)")
    p.add_argument("--domain", type=int, default=97, help="DDS domain of the node's runs (a private one)")
    args = p.parse_args(argv)
    timings = {key: medians(lambda: command_timing(cmd), args.repeats) for key, cmd in {**REFERENCE, **HELP}.items()}
    with tempfile.TemporaryDirectory(prefix="bcg_startup_") as folder:
        timings[NODE_KEY] = medians(lambda: node_first_command(args.domain, Path(folder)), args.repeats)
    print(f"start-up, median of {args.repeats} fresh processes each (load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs):")
    print("\n".join(report_lines(timings)))
    print(result_line({key: wall for key, (wall, _) in timings.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
