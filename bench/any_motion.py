"""The one-command recipe on motion it was not made on: held-out windows of real motion capture.

    python bench/any_motion.py [--windows bench/any_motion_windows.yaml] [--out bench/results/any_motion]
                               [--runs runs/any_motion] [--jobs 2] [--only LABEL ...] [--device cpu]
                               [--eval-only] [--set KEY=VALUE ...]

For each window of the list (fixed before any training on it) this runs the one command a user runs,
`bcg-train --motion WINDOW --run-dir RUNS/LABEL` (no other flag; a run folder left by an earlier,
interrupted bench is resumed instead), then evaluates the policy the trainer picked and exported
(RUN/policy/*.onnx) with `bcg-eval --mujoco-only --seeds 5 --duration 15` from three starts: on the
reference's first frame, from rest, and from rest after a 0.4 s hold. Per window it writes
OUT/LABEL/<start>/eval.json (bcg-eval's), OUT/LABEL/row.json and a copy of the run's screening
(OUT/LABEL/screen.md); then OUT/table.md and OUT/results.json for all windows. The training's console
goes to RUNS/LABEL/train.log. A window stands when its pick falls 0/5 from every start.

Columns: falls from each start; world-frame tracking and tracking without the drift [cm] (on the
reference start); the root's horizontal distance from the reference's after the run [m]; the
environment steps and training wall-clock of the pick (its sidecar). Last line:
`windows_standing=K/N median_hours=H median_env_steps=S` (medians over the windows that stand).
Training runs are long (hours each on a 2-core CPU): `--jobs 2` trains two windows at a time, and a
rerun skips every window whose pick is already evaluated.

`--set KEY=VALUE` (repeatable) is passed to every new training: an experiment on the recipe (a contact
model, a stiffness, bundling off), with its own `--runs` and `--out`; the table's first line names
the settings. The one command itself has none.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

STARTS = {"reference": [], "rest": ["--from-rest"], "hold": ["--from-rest", "--hold", "0.4"]}
"""bcg-eval's arguments for each start."""
SEEDS, DURATION_S = 5, 15.0


def load_windows(path: Path) -> List[str]:
    """The motion strings of the list (each a file of the motion folder with its window)."""
    windows = [str(w["motion"]) for w in yaml.safe_load(path.read_text())["windows"]]
    if not windows:
        raise ValueError(f"{path}: no windows")
    return windows


def label(motion: str) -> str:
    from bcg_train.motion.library import motion_label
    return motion_label(motion)


def pick_of(run: Path) -> Optional[Path]:
    """The exported pick of a finished run (RUN/policy/*.onnx), or None."""
    found = sorted((run / "policy").glob("*.onnx"))
    return found[0] if found else None


def train(motion: str, run: Path, device: str, log: Path, settings: Sequence[str] = ()) -> int:
    """The one command with `settings` as `--set`s (or its resume, when an earlier bench left the run
    unfinished: the run's own settings)."""
    if (run / "checkpoints").is_dir() and any((run / "checkpoints").glob("iter_*.pt")):
        command = ["bcg-train", "--resume", str(run)]
    else:
        command = ["bcg-train", "--motion", motion, "--run-dir", str(run)] + (["--device", device]
                                                                              if device != "cpu" else [])
        command += [arg for item in settings for arg in ("--set", item)]
    print(f"any_motion: {' '.join(command)}", file=sys.stderr, flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode


def evaluate(policy: Path, motion: str, out: Path) -> Dict[str, dict]:
    """bcg-eval in MuJoCo from each start: {start: eval.json}."""
    results = {}
    for start, extra in STARTS.items():
        folder = out / start
        command = ["bcg-eval", str(policy), "--motion", motion, "--mujoco-only", "--seeds", str(SEEDS),
                   "--duration", f"{DURATION_S:g}", "--out", str(folder), *extra]
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        result = json.loads((folder / "eval.json").read_text())
        result["policy"] = policy.name                  # not the run folder's place on this machine
        (folder / "eval.json").write_text(json.dumps(result, indent=2))
        results[start] = result
    return results


def closest_to_standing(rows: List[dict]) -> Optional[dict]:
    """Of a run whose screening picked nothing, the screened checkpoint that came closest: the fewest
    falls over both starts, then the longest time up, then the least world tracking error [cm]."""
    if not rows:
        return None
    best = min(rows, key=lambda r: (r["falls_reference"] + r["falls_hold"], -r["time_up_s"], r["tracking_cm"]))
    return {k: best[k] for k in ("iteration", "falls_reference", "falls_hold", "time_up_s", "tracking_cm",
                                 "tracking_root_xy_cm", "root_offset_m")}


def progress(run: Path) -> Tuple[int, int]:
    """(the iteration of the run's newest checkpoint, the iterations its configuration plans)."""
    from bcg_train.checkpoint import checkpoint_iteration, checkpoints_in
    found = checkpoints_in(run / "checkpoints") if (run / "checkpoints").is_dir() else []
    config = yaml.safe_load((run / "config.yaml").read_text())["config"]
    planned = config[config["algorithm"]]["iterations"]
    return (checkpoint_iteration(found[-1]) if found else 0), int(planned)


def row_for(motion: str, run: Path, out: Path) -> dict:
    """The window's row: evaluated now unless OUT/LABEL/row.json is of this very pick."""
    policy = pick_of(run)
    screen = run / "screen" / "screen.json"
    row = {"motion": motion, "label": label(motion), "pick": None}
    if policy is None:
        row["trained_iterations"], row["planned_iterations"] = progress(run)
        screened = json.loads(screen.read_text()) if screen.is_file() else {"rows": [], "settings": {}}
        row["closest"] = closest_to_standing(screened["rows"])
        row["screen_seeds"] = screened["settings"].get("seeds")
        if screen.is_file():
            out.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run / "screen" / "screen.md", out / "screen.md")
        return row
    saved = out / "row.json"
    stamp = f"{policy.stat().st_size}:{policy.stat().st_mtime_ns}"
    if saved.is_file() and json.loads(saved.read_text()).get("stamp") == stamp:
        return json.loads(saved.read_text())
    sidecar = json.loads(policy.with_suffix(".json").read_text())
    evals = evaluate(policy, motion, out)
    shutil.copyfile(run / "screen" / "screen.md", out / "screen.md")
    ref = evals["reference"]["summary"]
    row.update(pick=policy.name, iteration=sidecar["iteration"], env_steps=sidecar["env_steps"],
               train_hours=sidecar["train_wall_clock_s"] / 3600.0, stamp=stamp,
               **{f"falls_{s}": e["summary"]["falls_mujoco"] for s, e in evals.items()},
               tracking_cm=ref["tracking_error_mujoco_cm"], tracking_root_xy_cm=ref["tracking_error_root_xy_mujoco_cm"],
               root_offset_m=ref["final_root_offset_mujoco_m"])
    row["standing"] = all(row[f"falls_{s}"] == 0 for s in STARTS)
    out.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(row, indent=2))
    return row


def line_without_pick(r: dict) -> str:
    """The table line of a window whose run picked nothing (yet): how far it trained, and what its
    screened checkpoint that came closest did."""
    done, planned = r.get("trained_iterations"), r.get("planned_iterations")
    status = "no pick" if done is None or done >= planned else f"still training ({done} of {planned} iterations)"
    c = r.get("closest")
    if c is None:
        return f"| `{r['motion']}` | {status}; no checkpoint screened | | | | | |"
    n = r["screen_seeds"]
    return (f"| `{r['motion']}` | {status}; closest, iteration {c['iteration']} (the trainer's screen, {n} seeds): "
            f"{c['falls_reference']}/{n} / - / {c['falls_hold']}/{n} | {c['tracking_cm']:.1f} | "
            f"{c['tracking_root_xy_cm']:.1f} | {c['root_offset_m']:.2f} | | |")


def table(rows: List[dict], settings: Sequence[str] = ()) -> str:
    """The markdown table of `rows`, after a line naming the training's `settings` (none: the one command)."""
    trained = " ".join(f"--set {s}" for s in settings)
    lines = [f"Trained by `bcg-train --motion WINDOW{' ' + trained if trained else ''}`.", "",
             "| window | falls: reference / rest / hold | world tracking [cm] | without the drift [cm] | "
             "root off at the end [m] | env steps | training [h] |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["pick"] is None:
            lines.append(line_without_pick(r))
            continue
        falls = " / ".join(f"{r[f'falls_{s}']}/{SEEDS}" for s in STARTS)
        lines.append(f"| `{r['motion']}` | {falls} | {r['tracking_cm']:.1f} | {r['tracking_root_xy_cm']:.1f} | "
                     f"{r['root_offset_m']:.2f} | {r['env_steps']:,} | {r['train_hours']:.2f} |")
    return "\n".join(lines) + "\n"


def summary_line(rows: List[dict]) -> str:
    standing = [r for r in rows if r.get("standing")]
    hours = statistics.median(r["train_hours"] for r in standing) if standing else float("nan")
    steps = statistics.median(r["env_steps"] for r in standing) if standing else float("nan")
    return f"windows_standing={len(standing)}/{len(rows)} median_hours={hours:.2f} median_env_steps={steps:.0f}"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--windows", type=Path, default=Path(__file__).with_name("any_motion_windows.yaml"))
    p.add_argument("--out", type=Path, default=Path("bench/results/any_motion"))
    p.add_argument("--runs", type=Path, default=Path("runs/any_motion"), help="the training runs' folders")
    p.add_argument("--jobs", type=int, default=1, help="windows trained at a time")
    p.add_argument("--only", nargs="+", help="only these windows (labels, e.g. run1_subject2_120-135)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--eval-only", action="store_true", help="train nothing: evaluate the picks there are")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="passed to every new bcg-train: an experiment on the recipe (use its own --runs, --out)")
    args = p.parse_args(argv)
    if not os.environ.get("BCG_MOTION_DIR"):
        print("any_motion: set BCG_MOTION_DIR to the folder of the LAFAN1 G1 takes", file=sys.stderr)
        return 2
    windows = load_windows(args.windows)
    if args.only:
        windows = [w for w in windows if label(w) in args.only]
    if not args.eval_only:
        todo = [w for w in windows if pick_of(args.runs / label(w)) is None]
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            codes = list(pool.map(lambda w: train(w, args.runs / label(w), args.device,
                                                  args.runs / label(w) / "train.log", args.set), todo))
        for w, code in zip(todo, codes):
            if code:
                print(f"any_motion: {w}: bcg-train exited {code} ({args.runs / label(w) / 'train.log'})",
                      file=sys.stderr)
    rows = [row_for(w, args.runs / label(w), args.out / label(w)) for w in windows]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2))
    text = table(rows, args.set)
    (args.out / "table.md").write_text(text)
    print(text, end="")
    print(summary_line(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
