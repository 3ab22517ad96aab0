"""Gradient-variance study of Bundled Contact Gradients on the G1 and the cost of a bundled SHAC window
(definitions: `bcg_train.bundling_study`).

Outputs (atomically) in --out: study.md, study.csv, variance_vs_kappa.png, variance_profile.png,
ablations.png, pointmass_curves.png, pointmass_bias_variance.png.

    python bench/bundling_study.py [--quick] [--out out/bundling_study]

Run time on 2 shared CPU cores: about 6 min in full (128 envs, 4 kappas, both ablation scenarios;
measured before the impact-only rows were added), 2.6-3.6 min with --quick (24 envs, kappa 50 and
300, ablations on jump only; same code paths).

Last line: variance_ratio_k300=<no-bundle over bundle, jump, parameters> window_cost_ratio=<bundled
over plain wall-clock of a 32-step window, jump, B = 10> window_cost_ratio_impact_only=<the same with
bundles of the impact only (onset_fraction 0.25, end_when_released)>.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Optional, Sequence  # noqa: E402

import torch  # noqa: E402
import warp as wp  # noqa: E402

from bcg_train.bundling_study.report import goal_row, write_outputs  # noqa: E402
from bcg_train.bundling_study.study import FULL, QUICK, run_study  # noqa: E402

wp.config.quiet = True
wp.config.log_level = wp.LOG_WARNING


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer envs, kappas, ablations and resamples")
    parser.add_argument("--out", type=Path, default=Path("out/bundling_study"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = run_study(QUICK if args.quick else FULL, log=lambda line: print(line, flush=True))
    write_outputs(results, args.out, "python bench/bundling_study.py" + (" --quick" if args.quick else ""))
    print(f"wrote {args.out}/study.md ({results.seconds / 60:.1f} min)")
    jump = {c.bundling: c.ratio for c in results.cost if c.scenario == "jump"}
    print(f"variance_ratio_k300={goal_row(results).ratio_params:.3g} window_cost_ratio={jump['B = 10']:.3g} "
          f"window_cost_ratio_impact_only={jump['impact only']:.3g}")


if __name__ == "__main__":
    main()
