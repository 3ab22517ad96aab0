"""Learning-curve PNGs from metrics.csv files: one run, or several side by side (e.g. SHAC vs PPO).

x axes: iterations, environment steps, wall-clock seconds, and every env counter that is a running
total (`env/<name>` columns that never decrease, e.g. bundling's branch steps, which are counted
separately from environment steps).

    bcg-curves RUN_DIR [RUN_DIR ...] -o OUT_DIR [--metric reward/total ...] [--windows 1-50,51-150]

--windows also writes OUT_DIR/windows.md (and prints it): the mean of each metric over each window
of iterations (inclusive), the runs' values side by side, so that a comparison's table can be
reproduced from its runs' metrics.csv.
"""
import argparse
import csv
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from bcg.atomic_file import write_atomic

from .background_screen import read_screen
from .train_log import CSV_NAME, ITERATION

BASE_AXES = {ITERATION: "iterations", "env_steps": "environment steps", "wall_clock_s": "wall-clock time (s)"}
DEFAULT_METRICS = ("reward/total", "reward/add", "episode/return", "episode/length", "loss/actor", "loss/critic",
                   "loss/value", "loss/surrogate", "add/loss", "add/neg_acc", "add/delta_abs_mean")
"""Metrics plotted when none are named (those a run lacks are left out)."""


def read_metrics(path: Path) -> Dict[str, np.ndarray]:
    """Columns of a metrics.csv (or of RUN_DIR/metrics.csv) as float arrays (empty cells are NaN)."""
    path = Path(path)
    if path.is_dir():
        path = path / CSV_NAME
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    columns = rows[0].keys() if rows else []
    return {c: np.array([float(r[c]) if r[c] else np.nan for r in rows]) for c in columns}


def parse_windows(text: str) -> List[Tuple[int, int]]:
    """'1-50,51-150' -> [(1, 50), (51, 150)] (iterations, inclusive); ValueError naming a bad window."""
    windows = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not (sep and lo.isdigit() and hi.isdigit() and int(lo) <= int(hi)):
            raise ValueError(f"--windows: '{part}' is not FIRST-LAST (whole iterations, FIRST <= LAST)")
        windows.append((int(lo), int(hi)))
    return windows


def present_metrics(runs: Dict[str, Dict[str, np.ndarray]], metrics: Sequence[str]) -> List[str]:
    """The metrics of `metrics` that at least one run logged, in their order."""
    return [m for m in metrics if any(m in r for r in runs.values())]


def window_table(runs: Dict[str, Dict[str, np.ndarray]], windows: Sequence[Tuple[int, int]],
                 metrics: Sequence[str]) -> str:
    """Markdown: a row per window of iterations, a column per metric holding each run's mean over the
    window (runs in the given order, separated by ' / '; '-' where a run has no finite value there)."""
    names = present_metrics(runs, metrics)
    lines = [f"runs: {' / '.join(runs)}", "", "| iterations | " + " | ".join(names) + " |",
             "|---" * (len(names) + 1) + "|"]
    for lo, hi in windows:
        cells = []
        for name in names:
            values = []
            for r in runs.values():
                col = r.get(name)
                inside = col[(r[ITERATION] >= lo) & (r[ITERATION] <= hi)] if col is not None else np.array([])
                inside = inside[np.isfinite(inside)]
                values.append(f"{inside.mean():.4g}" if inside.size else "-")
            cells.append(" / ".join(values))
        lines.append(f"| {lo}-{hi} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def x_axes(metrics: Dict[str, np.ndarray]) -> Dict[str, str]:
    """Column -> label of every usable x axis of one run."""
    axes = {k: v for k, v in BASE_AXES.items() if k in metrics}
    for name, col in metrics.items():
        finite = col[np.isfinite(col)]
        if name.startswith("env/") and finite.size > 1 and np.all(np.diff(finite) >= 0) and finite[-1] > finite[0]:
            axes[name] = name[len("env/"):].replace("_", " ")
    return axes


def plot_runs(runs: Dict[str, Dict[str, np.ndarray]], out_dir: Path,
              metrics: Optional[Sequence[str]] = None) -> List[Path]:
    """One PNG per x axis (present in every run), a panel per metric, one line per run. Returns the files."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = present_metrics(runs, metrics or DEFAULT_METRICS)
    axes_per_run = [x_axes(r) for r in runs.values()]
    common = {k: v for k, v in axes_per_run[0].items() if all(k in a for a in axes_per_run)}
    written = []
    for x_key, x_label in common.items():
        cols = min(3, max(1, len(names)))
        rows = max(1, -(-len(names) // cols))
        fig, grid = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.2 * rows), squeeze=False)
        for ax, metric in zip(grid.flat, names):
            for k, (label, run) in enumerate(runs.items()):
                if metric in run:
                    ok = np.isfinite(run[metric]) & np.isfinite(run[x_key])
                    ax.plot(run[x_key][ok], run[metric][ok], label=label, color=f"C{k}", linewidth=1.2)
            ax.set_title(metric, fontsize=9)
            ax.set_xlabel(x_label, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        for ax in list(grid.flat)[len(names):]:
            ax.set_visible(False)
        if len(runs) > 1:
            fig.legend(*grid.flat[0].get_legend_handles_labels(), loc="upper center", ncol=len(runs), fontsize=8)
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.1, top=0.93, hspace=0.6, wspace=0.3)
        path = out_dir / f"curves_vs_{x_key.replace('/', '_')}.png"
        write_atomic(path, lambda f, fig=fig: fig.savefig(f, dpi=90, format="png"))
        plt.close(fig)
        written.append(path)
    return written


class BackgroundCurves:
    """Draws one run's curves (`bcg-curves RUN_DIR -o OUT_DIR`) in a separate process at low priority
    (nice 10), so that training does not wait for matplotlib. `draw` starts a drawing unless one is
    still running (then it does nothing: the next one draws the newer rows); `finish` waits for it and
    draws the final curves."""

    def __init__(self, run_dir: Path, out_dir: Path):
        self.command = ["nice", "-n", "10", sys.executable, "-m", __name__, str(run_dir), "-o", str(out_dir)]
        self._process: Optional[subprocess.Popen] = None

    def draw(self) -> None:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL)

    def finish(self) -> None:
        self.wait()
        self.draw()
        self.wait()

    def wait(self) -> None:
        if self._process is not None:
            self._process.wait()


def plot_screen(report: dict, out_dir: Path) -> Optional[Path]:
    """OUT_DIR/mujoco.png: a run's screened checkpoints (RUN/screen/screen.json) by iteration: the time
    up in MuJoCo and the tracking error (world frame, and without the drift), falls from each start; the
    pick marked. None when nothing is screened."""
    rows = sorted(report.get("rows") or [], key=lambda r: int(r["iteration"]))
    if not rows:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    it = np.array([int(r["iteration"]) for r in rows])
    fig, (up, track, falls) = plt.subplots(1, 3, figsize=(13.5, 3.2))
    up.plot(it, [r["time_up_s"] for r in rows], "o-", color="C0")
    up.set_title("time up in MuJoCo, on the reference [s]", fontsize=9)
    track.plot(it, [r["tracking_cm"] for r in rows], "o-", color="C1", label="world frame")
    track.plot(it, [r["tracking_root_xy_cm"] for r in rows], "o-", color="C2", label="without the drift")
    track.set_title("tracking error up to the fall [cm]", fontsize=9)
    track.legend(fontsize=7)
    for k, start in enumerate(("reference", "hold")):
        falls.plot(it, [r[f"falls_{start}"] for r in rows], "o-", color=f"C{3 + k}", label=f"from {start}")
    falls.set_title(f"falls (of {report.get('settings', {}).get('seeds', '?')} seeds)", fontsize=9)
    falls.legend(fontsize=7)
    best = report.get("pick")
    for ax in (up, track, falls):
        if best:
            ax.axvline(int(best["iteration"]), color="k", alpha=0.4, linestyle="--")
        ax.set_xlabel("iterations (checkpoint)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.16, top=0.88, wspace=0.25)
    path = Path(out_dir) / "mujoco.png"
    write_atomic(path, lambda f: fig.savefig(f, dpi=90, format="png"))
    plt.close(fig)
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="bcg-curves", description="Learning curves of one or more training runs.")
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (or their metrics.csv)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="folder for the PNG files")
    parser.add_argument("--metric", action="append", help="metric column to plot (repeatable; default: a standard set)")
    parser.add_argument("--windows", help="also OUT/windows.md: each metric's mean over these windows of iterations "
                                          "(FIRST-LAST,...), the runs side by side")
    args = parser.parse_args(argv)
    try:
        windows = parse_windows(args.windows) if args.windows else None
        names = [p.resolve().name for p in args.runs]
        labels = names if len(set(names)) == len(names) else [str(p) for p in args.runs]
        runs = {label: read_metrics(p) for label, p in zip(labels, args.runs)}
    except (OSError, ValueError, KeyError) as e:
        print(f"bcg-curves: {e}", file=sys.stderr)
        return 1
    for path in plot_runs(runs, args.out, args.metric):
        print(path)
    if len(args.runs) == 1 and args.runs[0].is_dir():
        screened = plot_screen(read_screen(args.runs[0]) or {}, args.out)
        if screened:
            print(screened)
    if windows:
        table = window_table(runs, windows, args.metric or DEFAULT_METRICS)
        write_atomic(Path(args.out) / "windows.md", lambda f: f.write(table.encode()))
        print(table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
