"""The shipped policies started on the ground: mujoco_check without the band, several seeds each.

For every policy (default: the shipped kappa-300 SHAC policies) whose reference motion is found
(`python -m bcg_train.motion node-motion`; LAFAN1 segments need BCG_MOTION_DIR) and every seed, runs

    bcg launch mujoco_check.launch.py policy:=P motion:=M elastic_band:=false duration:=D seed:=S

(in lockstep: the result does not depend on the machine's load; a seed turns the robot to a random
heading and adds 0.02 rad of noise to its joints before the node's hand-over). Prints one row per
policy (passes, falls, policy steps, the policy's first observation against rest, lowest pelvis)
and writes OUT/<policy>/seed<S>.json (each verdict), OUT/summary.json and OUT/summary.md.

    python bench/handover_checks.py [--policies policies/shac_*_k300.onnx ...] [--seeds 5] [--duration 15]
                                    [--out out/handover_checks] [--domain 150]

Last line: passed=<runs that passed>/<runs>.
"""
import argparse
import glob
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

from bcg.atomic_file import write_text_atomic
from bcg.contract import read_contract

REPO = Path(__file__).resolve().parents[1]
BCG = str(Path(sys.executable).with_name("bcg"))


def node_motion(name: str, folder: Path) -> Optional[str]:
    """The nodes' motion argument for the contract's motion `name`, or None when its data is not found."""
    proc = subprocess.run([sys.executable, "-m", "bcg_train.motion", "node-motion", name, "--out", str(folder)],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def check(policy: Path, motion: str, seed: int, duration: float, verdict: Path, domain: int) -> Dict:
    """One mujoco_check without the band; its verdict (the launcher's exit code added)."""
    proc = subprocess.run([BCG, "launch", "mujoco_check.launch.py", f"policy:={policy}", f"motion:={motion}",
                           "elastic_band:=false", f"duration:={duration:g}", f"seed:={seed}", f"verdict:={verdict}",
                           f"domain_id:={domain}"], capture_output=True, text=True)
    if not verdict.is_file():
        raise SystemExit(f"{policy} seed {seed}: no verdict (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return {**json.loads(verdict.read_text()), "exit_code": proc.returncode}


def row(name: str, runs: List[Dict]) -> Dict:
    """One policy's summary over its seeds."""
    starts = [r["start_deviation"] for r in runs if r.get("start_deviation")]
    return {"policy": name, "runs": len(runs), "passed": sum(r["passed"] for r in runs),
            "falls_s": [round(r["fall_time_s"], 2) for r in runs if r["fall_time_s"] is not None],
            "policy_steps_min": min(r["policy_steps"] or 0 for r in runs),
            "start_joint_pos_rad_max": max((s["joint_pos_rad"] for s in starts), default=None),
            "start_joint_vel_rad_s_max": max((s["joint_vel_rad_s"] for s in starts), default=None),
            "start_tilt_deg_max": max((s["tilt_deg"] for s in starts), default=None),
            "min_root_height_m": min(r["min_root_height_m"] for r in runs)}


def markdown(rows: List[Dict], skipped: List[str], seeds: int, duration: float) -> str:
    lines = [f"mujoco_check without the band, {duration:g} s, seeds 0..{seeds - 1} (lockstep)", "",
             "| policy | passed | falls (s) | policy steps (min) | first observation: joints rad / rad/s / tilt deg "
             "(max) | lowest pelvis (m) |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['policy']} | {r['passed']}/{r['runs']} | {', '.join(map(str, r['falls_s'])) or '-'} | "
                     f"{r['policy_steps_min']} | {r['start_joint_pos_rad_max']} / {r['start_joint_vel_rad_s_max']} / "
                     f"{r['start_tilt_deg_max']} | {r['min_root_height_m']:.3f} |")
    lines += [f"\nnot checked (motion data not found): {', '.join(skipped)}"] if skipped else []
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policies", nargs="+", default=sorted(glob.glob(str(REPO / "policies" / "shac_*_k300.onnx"))))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--out", type=Path, default=Path("out/handover_checks"))
    p.add_argument("--domain", type=int, default=150)
    args = p.parse_args(argv)
    rows, skipped, total, passed = [], [], 0, 0
    for policy in map(Path, args.policies):
        name = policy.stem
        motion = node_motion(read_contract(policy).motion, args.out / "motions")
        if motion is None:
            skipped.append(name)
            print(f"{name}: motion data not found, not checked", flush=True)
            continue
        runs = [check(policy, motion, seed, args.duration, args.out / name / f"seed{seed}.json", args.domain)
                for seed in range(args.seeds)]
        rows.append(row(name, runs))
        total, passed = total + len(runs), passed + rows[-1]["passed"]
        print(json.dumps(rows[-1]), flush=True)
    write_text_atomic(args.out / "summary.json", json.dumps({"rows": rows, "skipped": skipped}, indent=2) + "\n")
    text = markdown(rows, skipped, args.seeds, args.duration)
    write_text_atomic(args.out / "summary.md", text)
    print(text + f"passed={passed}/{total}")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
