"""Validate the differentiable G1 simulator (bcg_train.diffsim) against MuJoCo on the same XML: the
comparisons of `bcg_train.diffsim.mujoco_reference` (no contact, with and without friction loss;
drop tests from 5 mm and 30 mm at kappa 50, 100, 300, 1000), reported as tables and plots.

Writes DIR/validation.md, DIR/validation.csv, DIR/drop_test.png, DIR/no_contact.png.

    python bench/validate_diffsim.py [--out out/validation] [--quick]
"""
import argparse
import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import warp as wp

from bcg.atomic_file import write_atomic, write_text_atomic
from bcg_train.diffsim import Model, SimConfig
from bcg_train.diffsim.mujoco_reference import (
    DROP_CLEARANCES,
    AirResult,
    DropTrace,
    mujoco_drop,
    no_contact_agreement,
    warp_drop,
)

wp.config.log_level = wp.LOG_WARNING
KAPPAS = (50.0, 100.0, 300.0, 1000.0)

@dataclass
class Report:
    air_duration: float             # s
    drop_duration: float            # s
    air: List[AirResult] = field(default_factory=list)
    mujoco: Dict[float, DropTrace] = field(default_factory=dict)
    """clearance of the feet at release [m] -> MuJoCo's trace"""
    drops: Dict[Tuple[float, float], DropTrace] = field(default_factory=dict)
    """(clearance [m], kappa) -> the simulator's trace"""


def drop_rows(report: Report) -> List[dict]:
    """One row per (drop, kappa): settled (second-half mean) and final numbers, Warp vs MuJoCo, in mm."""
    mm = 1000.0
    rows = []
    for (drop, kappa), w in report.drops.items():
        mj = report.mujoco[drop]
        rows.append({
            "drop_mm": round(drop * mm), "kappa": kappa,
            "final_height_warp_mm": w.base_height[-1] * mm, "final_height_mujoco_mm": mj.base_height[-1] * mm,
            "final_height_diff_mm": (w.base_height[-1] - mj.base_height[-1]) * mm,
            "min_height_warp_mm": w.base_height.min() * mm,
            "pen_mean_warp_mm": w.settled(w.penetration_mean) * mm,
            "pen_mean_mujoco_mm": mj.settled(mj.penetration_mean) * mm,
            "pen_mean_diff_mm": (w.settled(w.penetration_mean) - mj.settled(mj.penetration_mean)) * mm,
            "pen_max_warp_mm": w.penetration_max.max() * mm, "pen_max_mujoco_mm": mj.penetration_max.max() * mm,
            "hover_warp_mm": w.settled(w.contact_height) * mm, "hover_mujoco_mm": mj.settled(mj.contact_height) * mm,
            "hover_diff_mm": (w.settled(w.contact_height) - mj.settled(mj.contact_height)) * mm,
            "contacts_warp": w.settled(w.num_contacts), "contacts_mujoco": mj.settled(mj.num_contacts),
        })
    return rows


def write_tables(report: Report, out: Path) -> str:
    air_rows = [{"frictionloss": r.frictionloss, "max_joint_error_rad": r.max_joint_error,
                 "max_base_error_m": r.max_base_error, "min_limit_margin_rad": r.min_limit_margin} for r in report.air]
    drops = drop_rows(report)
    lines = ["# diffsim vs MuJoCo", "",
             f"## (a) No contact, {report.air_duration:g} s, same torques (Euler, h = 0.005 s)", "",
             "| friction loss | max joint error [rad] | max base position error [m] | min limit margin [rad] |",
             "|---|---|---|---|"]
    lines += [f"| {'on' if r['frictionloss'] else 'off'} | {r['max_joint_error_rad']:.3g} | "
              f"{r['max_base_error_m']:.3g} | {r['min_limit_margin_rad']:.3f} |" for r in air_rows]
    lines += ["", f"## (b) Drop test, {report.drop_duration:g} s, PD holding the default pose "
                  "(Warp dt 0.02 / 4 substeps, MuJoCo 1 kHz)", "",
              "Heights and penetrations in mm; 'settled' = mean over the second half of the run; hover = mean "
              "signed height of the contacting spheres (MuJoCo: mean contact dist).", "",
              "| drop | kappa | final height Warp | MuJoCo | diff | mean pen. Warp (settled) | MuJoCo | diff | "
              "max pen. Warp | MuJoCo | hover Warp | MuJoCo | diff | contacts Warp | MuJoCo |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = ["final_height_warp_mm", "final_height_mujoco_mm", "final_height_diff_mm", "pen_mean_warp_mm",
            "pen_mean_mujoco_mm", "pen_mean_diff_mm", "pen_max_warp_mm", "pen_max_mujoco_mm", "hover_warp_mm",
            "hover_mujoco_mm", "hover_diff_mm", "contacts_warp", "contacts_mujoco"]
    lines += ["| {} mm | {:g} | ".format(r["drop_mm"], r["kappa"]) + " | ".join(f"{r[k]:.2f}" for k in keys) + " |"
              for r in drops]
    text = "\n".join(lines) + "\n"
    write_text_atomic(out / "validation.md", text)

    table = io.StringIO()
    w = csv.writer(table)
    w.writerow(["section", "key", "value"])
    for r in air_rows:
        for k, v in r.items():
            w.writerow([f"no_contact_frictionloss_{'on' if r['frictionloss'] else 'off'}", k, v])
    for r in drops:
        for k, v in r.items():
            w.writerow([f"drop_{r['drop_mm']}mm_kappa_{r['kappa']:g}", k, v])
    write_text_atomic(out / "validation.csv", table.getvalue())
    return text


def _save_png(fig, path: Path) -> None:
    write_atomic(path, lambda f: fig.savefig(f, dpi=110, format="png"))


def write_plots(report: Report, out: Path) -> None:
    """drop_test.png (height, penetration, hover over time) and no_contact.png (joint error)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for r in report.air:
        ax.semilogy(r.time, np.maximum(r.joint_error, 1e-17),
                    label=f"friction loss {'on' if r.frictionloss else 'off'}")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("max joint error Warp - MuJoCo [rad]")
    ax.set_title("No contact, same torques")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    _save_png(fig, out / "no_contact.png")
    plt.close(fig)

    drops = list(report.mujoco)
    fig, axes = plt.subplots(3, len(drops), figsize=(7 * len(drops), 10), sharex=True, squeeze=False)
    series = [("base_height", "pelvis height [mm]"), ("penetration_mean", "mean foot penetration [mm]"),
              ("contact_height", "mean height of contacting spheres [mm]")]
    for col, drop in enumerate(drops):
        traces = [tr for (d, _), tr in report.drops.items() if d == drop] + [report.mujoco[drop]]
        for row, (attr, ylabel) in enumerate(series):
            ax = axes[row, col]
            for tr in traces:
                style = dict(color="k", linestyle="--", linewidth=2) if tr is report.mujoco[drop] else {}
                ax.plot(tr.time, getattr(tr, attr) * 1000.0, label=tr.label, **style)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
        axes[0, col].set_title(f"released {round(drop * 1000)} mm above the floor")
        axes[0, col].legend(fontsize=8)
        axes[-1, col].set_xlabel("time [s]")
    fig.suptitle("Drop test: Warp diffsim vs MuJoCo (PD holding the default pose)")
    fig.tight_layout()
    _save_png(fig, out / "drop_test.png")
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/validation"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="kappa 50 and 300 only, 1 s drop, 0.5 s in the air")
    parser.add_argument("--model", default=None, help="MuJoCo XML (default: $BCG_G1_MODEL)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    air_duration, drop_duration = (0.5, 1.0) if args.quick else (1.0, 2.0)
    kappas = (50.0, 300.0) if args.quick else KAPPAS
    report = Report(air_duration, drop_duration)
    for fl in (False, True):
        report.air.append(no_contact_agreement(fl, air_duration, model_path=args.model))
    model = Model.from_mujoco(args.model, device="cpu")
    for drop in DROP_CLEARANCES:
        report.mujoco[drop] = mujoco_drop(drop_duration, model, drop)
        for kappa in kappas:
            report.drops[(drop, kappa)] = warp_drop(SimConfig(kappa=kappa), drop_duration, model, drop)
    print(write_tables(report, args.out), end="")
    write_plots(report, args.out)
    print(f"wrote validation.md, validation.csv, drop_test.png, no_contact.png to {args.out}")


if __name__ == "__main__":
    main()
