"""Sim-to-sim fidelity bench: MuJoCo against the training simulator (bcg_train.evaluation.fidelity).

For each simulator variant (the defaults, or `--variant`s), from the same initial state:
- open loop: both plants track the reference's joint angles with the contract's PD gains (or the
  description's, without a policy) for `--duration` seconds;
- closed loop, per `--policy`: the policy on each plant's own state, `--seeds` initial noises.
Per quantity (pelvis height, pelvis orientation, joint angles, foot heights, foot forces) the mean
absolute divergence up to 0.04 s, 0.2 s, 1 s and the whole run, as a markdown table (OUT/sim_to_sim.md),
a CSV (OUT/sim_to_sim.csv) and one PNG per run (OUT/<run>.png).

    python bench/sim_to_sim.py [--motion NAME|FILE] [--policy P.onnx ...] [--duration 2] [--kappa 300]
                               [--variant NAME:key=value,key=value ...] [--out out/sim_to_sim]

A variant changes SimConfig fields (e.g. `stiff:kappa=1000`, `legacy:contact_stabilization=0`); a
policy's own contract (kappa and simulator settings) is its base, the motion's defaults otherwise.
Last line: pelvis_height_1s_mm=<open loop, first variant> foot_force_1s_N=<same>.
"""
import argparse
import csv
import dataclasses
import io
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from bcg.atomic_file import write_atomic, write_text_atomic
from bcg.config_check import apply_overrides, parse_named_assignments
from bcg.contract import load_policy
from bcg.robot import RobotDescription
from bcg_train.diffsim import SimConfig
from bcg_train.evaluation.fidelity import QUANTITIES, Trace, at_times, divergence, open_loop
from bcg_train.evaluation.plants import MujocoPlant, WarpPlant
from bcg_train.evaluation.rollout import run_policy
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import load_clip
from bcg_train.motion.resample import ResampleConfig

TIMES = (0.04, 0.2, 1.0)
"""Seconds at which the cumulative mean divergence is reported (plus the whole run)."""
SCALE = {"m": ("mm", 1e3), "rad": ("deg", 180.0 / np.pi), "N": ("N", 1.0)}


def parse_variant(text: str, base: SimConfig) -> Tuple[str, SimConfig]:
    """'NAME:key=value,key=value' -> (NAME, base with those SimConfig fields changed)."""
    try:
        name, changes = parse_named_assignments(text)
    except ValueError as e:
        raise SystemExit(f"--variant {e}")
    cfg = apply_overrides(base, changes)
    cfg.validate()
    return name, cfg


def run_pair(name: str, config: SimConfig, robot: RobotDescription, model_path, clip, duration: float,
             policy=None, seed: int = 0) -> Tuple[str, Trace, Trace]:
    """(label, MuJoCo trace, Warp trace) of one open-loop (policy None) or closed-loop run."""
    mujoco_plant, warp_plant = MujocoPlant(robot), WarpPlant(config, model_path)
    if policy is None:
        traces = [open_loop(p, clip, robot.kp, robot.kd, duration) for p in (mujoco_plant, warp_plant)]
        return f"{name} open loop", traces[0], traces[1]
    traces = []
    for plant in (mujoco_plant, warp_plant):
        states: List = []
        run_policy(plant, policy, clip, seed, duration, record=states)
        traces.append(Trace.of(states, policy.contract.control_period_s))
    return f"{name} {Path(policy.path).stem} seed {seed}", traces[0], traces[1]


def rows_of(label: str, mj: Trace, warp: Trace) -> List[Dict]:
    div = divergence(mj, warp)
    means = at_times(div, mj.period_s, TIMES)
    rows = []
    for q, unit in QUANTITIES.items():
        shown, factor = SCALE[unit]
        whole = float(div[q].mean()) if len(div[q]) else float("nan")
        rows.append({"run": label, "quantity": q, "unit": shown, "steps": len(div[q]),
                     **{f"{t:g}s": v * factor for t, v in zip(TIMES, means[q])}, "whole": whole * factor})
    return rows


def plot(label: str, mj: Trace, warp: Trace, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for ax, (title, a, b, unit) in zip(axes.ravel(), [
            ("pelvis height [m]", mj.root_height, warp.root_height, ""),
            ("left foot height [mm]", mj.foot_height[:, 0] * 1e3, warp.foot_height[:, 0] * 1e3, ""),
            ("left foot force [N]", mj.foot_force[:, 0], warp.foot_force[:, 0], ""),
            ("right foot force [N]", mj.foot_force[:, 1], warp.foot_force[:, 1], "")]):
        ax.plot(mj.time[:len(a)], a, label="MuJoCo")
        ax.plot(warp.time[:len(b)], b, label="Warp")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0, 0].legend()
    for ax in axes[1]:
        ax.set_xlabel("time [s]")
    fig.suptitle(label)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    write_atomic(path, lambda f: f.write(buf.getvalue()))


def markdown(rows: Sequence[Dict], command: str) -> str:
    head = "| run | quantity | unit | " + " | ".join(f"<= {t:g} s" for t in TIMES) + " | whole run | steps |"
    lines = ["# Sim-to-sim fidelity: MuJoCo vs the training simulator", "",
             f"`{command}`", "", "Mean absolute divergence up to each time (cumulative mean over control steps).", "",
             head, "|---" * (len(TIMES) + 5) + "|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['quantity']} | {r['unit']} | "
                     + " | ".join(f"{r[f'{t:g}s']:.3g}" for t in TIMES) + f" | {r['whole']:.3g} | {r['steps']} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--motion", help="reference motion (default: the first policy's, else synthetic_dance)")
    p.add_argument("--policy", action="append", default=[], type=Path, help="exported policy (repeatable)")
    p.add_argument("--duration", type=float, default=2.0, help="seconds per run")
    p.add_argument("--seeds", type=int, default=1, help="closed-loop runs per policy (initial joint noise)")
    p.add_argument("--kappa", type=float, help="contact stiffness of the base simulator (default: contract's)")
    p.add_argument("--variant", action="append", default=[], help="NAME:key=value,... (SimConfig fields)")
    p.add_argument("--out", type=Path, default=Path("out/sim_to_sim"))
    p.add_argument("--model", help="G1 MuJoCo XML (default: $BCG_G1_MODEL)")
    args = p.parse_args(argv)
    policies = [load_policy(path) for path in args.policy]
    motion = args.motion or (policies[0].contract.motion if policies else "synthetic_dance")
    robot = RobotDescription.load(args.model)
    kinematics = RobotKinematics(robot)
    base = (SimConfig.from_contract(policies[0].contract.contact_stiffness, policies[0].contract.simulator)
            if policies else SimConfig())
    if args.kappa is not None:
        base = dataclasses.replace(base, kappa=args.kappa)
    variants = [parse_variant(v, base) for v in args.variant] or [("default", base)]
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    for name, config in variants:
        runs = [(None, 0)] + [(pol, seed) for pol in policies for seed in range(args.seeds)]
        for policy, seed in runs:
            resampling = ResampleConfig.of_policy(policy.contract) if policy else ResampleConfig()
            clip = load_clip(motion, kinematics, resampling, builtin_duration_s=args.duration)
            label, mj, warp = run_pair(name, config, robot, args.model, clip, args.duration, policy, seed)
            rows += rows_of(label, mj, warp)
            plot(label, mj, warp, args.out / (label.replace(" ", "_").replace("/", "_") + ".png"))
            print(f"{label}: MuJoCo {mj.steps} steps, Warp {warp.steps} steps", flush=True)
    command = "python bench/sim_to_sim.py " + " ".join(argv if argv is not None else __import__("sys").argv[1:])
    text = markdown(rows, command)
    write_text_atomic(args.out / "sim_to_sim.md", text)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(args.out / "sim_to_sim.csv", buf.getvalue())
    print(text)
    first = {r["quantity"]: r for r in rows if r["run"] == rows[0]["run"]}
    print(f"pelvis_height_1s_mm={first['pelvis_height']['1s']:.3g} foot_force_1s_N={first['foot_force']['1s']:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
