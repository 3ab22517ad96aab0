"""`bcg-eval`: an exported policy in MuJoCo and in the training simulator, in the paper's table format.

    bcg-eval POLICY.onnx [--motion NAME|FILE] [--motion-dir DIR] [--seeds 5] [--duration S] [--start S]
             [--from-rest [--hold S]] [--dds] [--out DIR]

For each seed the policy runs along its reference motion (default: the one in its contract) in
MuJoCo through the sim bridge's physics core (in process) and in the Warp simulator at the
contract's contact stiffness, from the same initial state (the reference's first frame, or the one
`--start` seconds into it: where in a motion a policy fails; with `--from-rest` standing still there
in the default pose, as the policy node starts the robot after its ramp; with `--hold S` the robot
first stands S seconds there unsupported under the policy's own PD gains, and leans and sags as
when a band or a hand lets it go, then the policy starts). Printed, and written to OUT/eval.json:
falls out of the seeds (root below 0.3 m), the mean foot-penetration difference Warp minus MuJoCo
[mm] (penetration = minus the mean signed height of the foot spheres in contact), and the tracking
error [cm] (mean per-body position error). `--dds` also runs `bcg launch mujoco_check.launch.py` once
per seed (bridge + policy node + evaluator over loopback DDS, real time) and adds its verdicts.
"""
import argparse
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import numpy as np

from bcg.atomic_file import write_text_atomic
from bcg.contract import PolicyFileError
from bcg.motion import MotionFileError
from bcg_train.motion.library import motion_help

if TYPE_CHECKING:         # the simulators (MuJoCo, Warp, torch) load where a policy is evaluated
    from .rollout import RunResult


def summarise(mujoco_runs: List["RunResult"], warp_runs: List["RunResult"]) -> dict:
    """The paper's row: falls, penetration difference Warp - MuJoCo [mm], tracking error [cm]; and the
    mean time with the robot's bodies touching each other in MuJoCo [s] and the mean horizontal distance
    of the root from the reference's at the end of the runs [m]. The
    Warp columns are None when the training simulator was not run (`warp_runs` empty)."""
    def mean(values):
        values = [v for v in values if np.isfinite(v)]
        return float(np.mean(values)) if values else float("nan")
    warp = bool(warp_runs)
    return {"seeds": len(mujoco_runs),
            "falls_mujoco": sum(r.fell for r in mujoco_runs),
            "falls_warp": sum(r.fell for r in warp_runs) if warp else None,
            "penetration_diff_mm": mean([m.contact_height_mm - w.contact_height_mm
                                         for m, w in zip(mujoco_runs, warp_runs)]) if warp else None,
            "tracking_error_mujoco_cm": mean([r.tracking_error_cm for r in mujoco_runs]),
            "tracking_error_warp_cm": mean([r.tracking_error_cm for r in warp_runs]) if warp else None,
            "tracking_error_root_xy_mujoco_cm": mean([r.tracking_error_root_xy_cm for r in mujoco_runs]),
            "self_contact_mujoco_s": mean([r.self_contact_s for r in mujoco_runs]),
            "final_root_offset_mujoco_m": mean([r.final_root_offset_m for r in mujoco_runs])}


def table(motion: str, kappa: float, row: dict, dds: Optional[dict]) -> str:
    lines = ["| motion | kappa | falls MuJoCo | falls Warp | pen. diff Warp - MuJoCo [mm] | tracking MuJoCo [cm] | "
             "tracking Warp [cm] | tracking MuJoCo without the drift [cm] |"
             + (" DDS stayed up | DDS pen. mean [mm] |" if dds else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if dds else "")]
    n = row["seeds"]

    def fmt(value, spec):
        return "n/a" if value is None else format(value, spec)
    falls_warp = "n/a" if row["falls_warp"] is None else f"{row['falls_warp']}/{n}"
    line = (f"| {motion} | {kappa:g} | {row['falls_mujoco']}/{n} | {falls_warp} | "
            f"{fmt(row['penetration_diff_mm'], '.2f')} | {row['tracking_error_mujoco_cm']:.1f} | "
            f"{fmt(row['tracking_error_warp_cm'], '.1f')} | {row['tracking_error_root_xy_mujoco_cm']:.1f} |")
    if dds:
        line += f" {dds['stayed_up']}/{dds['runs']} | {dds['penetration_mean_mm']:.2f} |"
    return "\n".join(lines + [line])


def run_dds(policy: Path, motion_file: str, seeds: int, duration: float, out: Path) -> dict:
    """mujoco_check once per seed over loopback DDS; the verdicts' falls and penetration. A run that
    wrote no verdict (exit code other than 0 = stayed up or 1 = fell) counts as `failed_runs`."""
    verdicts, failed = [], 0
    for k in range(seeds):
        path = out / f"mujoco_check_{k}.json"
        path.unlink(missing_ok=True)
        cmd = ["bcg", "launch", "mujoco_check.launch.py", f"policy:={policy}", f"motion:={motion_file}",
               f"duration:={duration:g}", f"verdict:={path}"]
        print(f"bcg-eval: DDS run {k + 1}/{seeds}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False).returncode
        if rc not in (0, 1) or not path.is_file():
            print(f"bcg-eval: DDS run {k + 1} wrote no verdict (exit code {rc})", file=sys.stderr, flush=True)
            failed += 1
            continue
        verdicts.append(json.loads(path.read_text()))
    return {"runs": len(verdicts), "failed_runs": failed, "stayed_up": sum(bool(v["stayed_up"]) for v in verdicts),
            "penetration_mean_mm": float(np.mean([v["foot_penetration_mean_mm"] for v in verdicts])) if verdicts
            else float("nan")}


def evaluate(policy_path: Path, motion: Optional[str] = None, seeds: int = 5, duration: float = 15.0,
             noise: float = 0.02, model: Optional[str] = None, log=None, motion_dir: Optional[str] = None,
             warp: bool = True, start_s: float = 0.0, from_rest: bool = False, hold_s: float = 0.0) -> dict:
    """The policy at `policy_path` in MuJoCo and (when `warp`) in the training simulator, `seeds` runs each along
    `motion` (default: the contract's; a named segment's files in `motion_dir`, default
    $BCG_MOTION_DIR) from `start_s` into it, on the reference or (`from_rest`) standing still as the
    policy node starts the robot, after `hold_s` [s] standing in the default pose under the policy's
    gains: {"policy", "motion", "start_s", "from_rest", "hold_s", "kappa", "simulator", "summary", "runs"}
    (the eval.json layout, without "dds"). Raises PolicyFileError, MotionFileError or ValueError."""
    from bcg.contract import load_policy
    from bcg.robot import RobotDescription
    from bcg_train.diffsim import SimConfig
    from bcg_train.motion.kinematics import RobotKinematics
    from bcg_train.motion.library import load_clip
    from bcg_train.motion.resample import ResampleConfig

    from .plants import MujocoPlant, WarpPlant
    from .rollout import run_policy
    policy = load_policy(policy_path)
    contract = policy.contract
    motion = motion or contract.motion
    if not motion:
        raise MotionFileError(f"{policy_path}: the contract names no motion; give --motion")
    robot = RobotDescription.load(model)
    kinematics = RobotKinematics(robot)
    clip = load_clip(motion, kinematics, ResampleConfig.of_policy(contract),
                     builtin_duration_s=duration, motion_dir=motion_dir)
    sim_config = SimConfig.from_contract(contract.contact_stiffness or SimConfig.kappa, contract.simulator)
    runs = {"mujoco": [], "warp": []}
    plants = {"mujoco": MujocoPlant(robot)}
    if warp:
        plants["warp"] = WarpPlant(sim_config, model)
    for seed in range(seeds):
        for name, plant in plants.items():
            r = run_policy(plant, policy, clip, seed, duration, noise, start_s=start_s, from_rest=from_rest,
                           hold_s=hold_s)
            runs[name].append(r)
            if log:
                log(f"seed {seed} {name:6s} {'FELL at %.2f s' % r.fall_time_s if r.fell else 'stayed up'}, "
                    f"tracking {r.tracking_error_cm:.1f} cm ({r.tracking_error_root_xy_cm:.1f} without the drift), "
                    f"contact height {r.contact_height_mm:.2f} mm"
                    + (f", legs touching {r.self_contact_s:.2f} s from {r.first_self_contact_s:.2f} s"
                       if r.first_self_contact_s is not None else ""))
    return {"policy": str(policy_path), "motion": motion, "start_s": start_s, "from_rest": from_rest,
            "hold_s": hold_s, "kappa": sim_config.kappa,
            "simulator": sim_config.contract_settings(), "summary": summarise(runs["mujoco"], runs["warp"]),
            "runs": {k: [asdict(r) for r in v] for k, v in runs.items()}}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bcg-eval", description=__doc__.split("\n\n")[0])
    p.add_argument("policy", type=Path, help="exported policy (.onnx with its contract)")
    p.add_argument("--motion", help=motion_help() + " (default: the contract's)")
    p.add_argument("--motion-dir", help="folder of the named segments' motion files (default: $BCG_MOTION_DIR)")
    p.add_argument("--seeds", type=int, default=5, help="runs per simulator (initial joint noise per seed)")
    p.add_argument("--duration", type=float, default=15.0, help="seconds per run (at most the motion's length)")
    p.add_argument("--noise", type=float, default=0.02, help="std of the initial joint-angle noise [rad]")
    p.add_argument("--start", type=float, default=0.0, help="seconds into the motion to start from (default 0)")
    p.add_argument("--from-rest", action="store_true",
                   help="start standing still in the default pose, facing the reference, as the policy node "
                        "starts the robot (default: on the reference, with its velocities)")
    p.add_argument("--hold", type=float, default=0.0, metavar="S",
                   help="with --from-rest: first stand S seconds unsupported in the default pose under the "
                        "policy's gains (the robot leans and sags, as when a band lets it go), then start "
                        "the policy (default 0)")
    p.add_argument("--mujoco-only", action="store_true", help="skip the training simulator's runs (its columns n/a)")
    p.add_argument("--dds", action="store_true", help="also run mujoco_check over loopback DDS per seed")
    p.add_argument("--out", type=Path, default=Path("out/eval"), help="folder for eval.json (and DDS verdicts)")
    p.add_argument("--model", help="G1 MuJoCo XML (default: $BCG_G1_MODEL)")
    return p


def usage_error(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with a combination of `bcg-eval`'s options, or None."""
    if args.seeds < 1 or args.duration <= 0:
        return "--seeds must be >= 1 and --duration > 0"
    if args.hold < 0 or (args.hold and not args.from_rest):
        return "--hold: seconds >= 0, with --from-rest only"
    if args.start and args.dds:
        return "--start: mujoco_check over DDS plays the motion from its start; drop --dds"
    return None


def dds_runs(args: argparse.Namespace, motion: str) -> dict:
    """`run_dds` of `--dds` for `motion` (a built-in motion written to OUT/motions for the nodes)."""
    from bcg.robot import RobotDescription
    from bcg_train.motion.kinematics import RobotKinematics
    from bcg_train.motion.library import motion_file_for_nodes
    kinematics = RobotKinematics(RobotDescription.load(args.model))
    motion_file = motion_file_for_nodes(motion, kinematics, args.out / "motions", args.duration, args.motion_dir)
    return run_dds(args.policy, motion_file, args.seeds, args.duration, args.out)


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    error = usage_error(args)
    if error:
        print(f"bcg-eval: {error}", file=sys.stderr)
        return 2
    try:
        result = evaluate(args.policy, args.motion, args.seeds, args.duration, args.noise, args.model,
                          log=lambda line: print(f"bcg-eval: {line}", file=sys.stderr, flush=True),
                          motion_dir=args.motion_dir, warp=not args.mujoco_only, start_s=args.start,
                          from_rest=args.from_rest, hold_s=args.hold)
    except (PolicyFileError, MotionFileError, ValueError) as e:
        print(f"bcg-eval: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    motion = result["motion"]
    dds = result["dds"] = dds_runs(args, motion) if args.dds else None
    write_text_atomic(args.out / "eval.json", json.dumps(result, indent=2))
    print(table(Path(motion).stem, result["kappa"], result["summary"], dds))
    return 0
