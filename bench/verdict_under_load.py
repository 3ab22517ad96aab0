"""Does mujoco_check's verdict depend on how busy the machine is? The same check, with and without
processes that burn every core beside it.

For one policy (default: the shipped synthetic_dance policy, which needs no motion data) this runs
`handover_checks.check` (mujoco_check over DDS on loopback, lockstep, no band, seed 0) REPS times on
the machine as it is and REPS times beside BURNERS busy-looping processes, alternating. The judged
fields of every verdict (passed, the fall, the lowest pelvis, the feet's penetration, tracking, the
policy steps, the final phase) must be the same in all runs; the pacing fields (real-time factor,
command rates) are printed beside them, as they are expected to differ.

    python bench/verdict_under_load.py [--policy policies/shac_synthetic_dance_k300.onnx] [--reps 2]
                                       [--burners N (default: CPUs + 1)] [--duration 10]
                                       [--out out/verdict_under_load] [--domain 170]

Writes OUT/<load>_<rep>.json (each verdict) and OUT/summary.json. Last line:
`identical=<True|False> runs=<n> real_time_factor_idle=<median> real_time_factor_burned=<median>`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from handover_checks import check, node_motion

from bcg.atomic_file import write_text_atomic
from bcg.contract import read_contract

REPO = Path(__file__).resolve().parents[1]
JUDGED = ("passed", "stayed_up", "fall_time_s", "min_root_height_m", "foot_penetration_mean_mm",
          "foot_penetration_max_mm", "tracking_error_rad", "policy_ran", "policy_steps", "final_phase")
"""Verdict fields that judge the policy: a verdict that does not depend on load keeps all of them."""
PACING = ("pacing", "real_time_factor", "command_rate_hz")


def judged(verdict: Dict) -> Dict:
    """The fields of a verdict that judge the policy."""
    return {k: verdict.get(k) for k in JUDGED}


def burn(count: int) -> List[subprocess.Popen]:
    """`count` processes that keep one core busy each until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", type=Path, default=REPO / "policies" / "shac_synthetic_dance_k300.onnx")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--burners", type=int, default=(os.cpu_count() or 1) + 1)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--out", type=Path, default=Path("out/verdict_under_load"))
    p.add_argument("--domain", type=int, default=170)
    args = p.parse_args(argv)
    motion = node_motion(read_contract(args.policy).motion, args.out / "motions")
    if motion is None:
        raise SystemExit(f"{args.policy}: its motion's data is not found (BCG_MOTION_DIR)")
    runs: Dict[str, List[Dict]] = {"idle": [], "burned": []}
    for rep in range(args.reps):
        for load in runs:
            burners = burn(args.burners) if load == "burned" else []
            try:
                verdict = check(args.policy, motion, 0, args.duration, args.out / f"{load}_{rep}.json", args.domain)
            finally:
                for b in burners:
                    b.kill()
                    b.wait()
            runs[load].append(verdict)
            print(json.dumps({"load": load, "rep": rep, **judged(verdict), **{k: verdict.get(k) for k in PACING}}),
                  flush=True)
    first = judged(runs["idle"][0])
    identical = all(judged(v) == first for vs in runs.values() for v in vs)
    rtf = {load: statistics.median(v["real_time_factor"] for v in vs) for load, vs in runs.items()}
    write_text_atomic(args.out / "summary.json", json.dumps(
        {"policy": args.policy.name, "burners": args.burners, "duration_s": args.duration, "identical": identical,
         "judged": first, "real_time_factor": rtf}, indent=2) + "\n")
    print(f"identical={identical} runs={sum(map(len, runs.values()))} "
          f"real_time_factor_idle={rtf['idle']:.2f} real_time_factor_burned={rtf['burned']:.2f}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
