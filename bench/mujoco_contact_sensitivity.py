"""Does a policy's fall (or survival) in MuJoCo hinge on MuJoCo's contact parameters?

The policy runs in MuJoCo as `bcg-eval` runs it (`rollout.run_policy`, the same seeds and initial
noise), once on the nominal model and once per variant of the model's contact: every geom's sliding
friction (`friction`: MuJoCo combines a pair's with max(), so this sets the feet against the floor),
torsional friction (`torsion`: condim 4 with that coefficient [m]), the contact's time constant
(`solref`: MuJoCo's default 0.02 s; smaller is stiffer), and the friction cone (`cone`: pyramidal,
MuJoCo's default, or elliptic). A fall that moves by seconds under a plausible change is a policy at
the edge of its stability there, not a fault of one simulator.

    python bench/mujoco_contact_sensitivity.py POLICY.onnx [--motion NAME] [--seeds 2] [--duration 15]
        [--variant NAME:key=value,... ...]

Without `--variant`: friction 0.6 and 2, torsion 0.02, solref 0.005 and 0.04, elliptic cone, and
no self-collision (the robot's bodies pass through each other, as in the training simulator).
Prints one line per variant (falls, each seed's fall time) and a Markdown table at the end.
"""
import argparse
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import mujoco

from bcg.config_check import parse_named_assignments
from bcg.contract import load_policy
from bcg.robot import RobotDescription
from bcg_train.evaluation.mujoco_contact import apply_contact
from bcg_train.evaluation.plants import MujocoPlant
from bcg_train.evaluation.rollout import run_policy
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import load_clip
from bcg_train.motion.resample import ResampleConfig

DEFAULT_VARIANTS = ("friction 0.6:friction=0.6", "friction 2:friction=2", "torsion 0.02:torsion=0.02",
                    "solref 0.005:solref=0.005", "solref 0.04:solref=0.04", "elliptic cone:cone=elliptic",
                    "no self-collision:self_collision=0")
"""The variants run without `--variant` (NAME:key=value)."""


def fall_times(robot: RobotDescription, policy, clip, changes: Dict[str, object], seeds: int,
               duration_s: float) -> List[Optional[float]]:
    """Per seed: when the policy fell in MuJoCo with `changes` applied [s], None if it stayed up."""
    plant = MujocoPlant(robot)               # each run resets its state; the changed model stays
    apply_contact(plant.core.model, changes)
    out = []
    for seed in range(seeds):
        result = run_policy(plant, policy, clip, seed, duration_s)
        out.append(result.fall_time_s if result.fell else None)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("policy", type=Path, help="exported policy")
    p.add_argument("--motion", help="reference motion (default: the policy's)")
    p.add_argument("--seeds", type=int, default=2, help="runs per variant (initial joint noise)")
    p.add_argument("--duration", type=float, default=15.0, help="seconds per run")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:key=value,... (friction, torsion, solref, cone)")
    p.add_argument("--model", help="G1 MuJoCo XML (default: $BCG_G1_MODEL)")
    args = p.parse_args(argv)
    try:                                  # a bad variant fails before any run
        variants = [("nominal", {})] + [parse_named_assignments(v) for v in (args.variant or DEFAULT_VARIANTS)]
        for _, changes in variants:
            apply_contact(mujoco.MjModel.from_xml_string("<mujoco/>"), changes)
    except ValueError as e:
        raise SystemExit(f"--variant: {e}")
    policy = load_policy(args.policy)
    robot = RobotDescription.load(args.model)
    clip = load_clip(args.motion or policy.contract.motion, RobotKinematics(robot),
                     ResampleConfig.of_policy(policy.contract), builtin_duration_s=args.duration)
    lines = ["| variant | falls | fall time per seed [s] |", "|---|---|---|"]
    for name, changes in variants:
        times = fall_times(robot, policy, clip, changes, args.seeds, args.duration)
        shown = " ".join("up" if t is None else f"{t:.2f}" for t in times)
        falls = sum(t is not None for t in times)
        print(f"{name}: {falls}/{args.seeds} falls ({shown})", flush=True)
        lines.append(f"| {name} | {falls}/{args.seeds} | {shown} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
