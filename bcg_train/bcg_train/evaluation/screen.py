"""`bcg-screen`: every checkpoint of a run in MuJoCo, to pick the one to ship.

    bcg-screen RUN_DIR [--motion NAME|FILE] [--motion-dir DIR] [--seeds 2] [--duration 15]
               [--every N] [--out RUN_DIR/screen]

A run's checkpoints differ more than its training curves show: fine-tuning the shipped dance, MuJoCo's
world-frame tracking went 146, 122, 63, 124, ... 172 cm over checkpoints 150-600, each of them
standing. For each checkpoint in RUN_DIR/checkpoints (every N-th iteration with `--every`) this
exports the policy (OUT/iter_N.onnx) and runs it in MuJoCo as `bcg-eval --mujoco-only` does, `seeds`
runs of `duration` s from two starts: on the reference's first frame, and from rest after a hold
(`bcg-eval --from-rest --hold 0.4`, the DDS check's start). It writes OUT/screen.json and
OUT/screen.md (one row per checkpoint: falls from each start; on the reference the time up, world
tracking, tracking without the drift, legs touching) and names the *pick*: among the checkpoints that
fell from neither start, the one with the lowest world tracking error, with its `bcg-ship` command.

A checkpoint already in OUT/screen.json with the same settings (and the same file: size and
modification time) is not evaluated again, so screening a run while it trains only evaluates its new
checkpoints; the rows of checkpoints pruned since stay in the report. The pick is the best of several on the very
metric it is chosen by, from one training seed: say so when quoting it.
"""
import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from bcg.atomic_file import write_text_atomic
from bcg.contract import PolicyFileError
from bcg.motion import MotionFileError

from ..checkpoint import CHECKPOINT_DIR, CheckpointError, checkpoint_iteration, checkpoint_name, checkpoints_in
from .cli import evaluate
from .table import HOLD_S

STARTS = {"reference": {"from_rest": False, "hold_s": 0.0}, "hold": {"from_rest": True, "hold_s": HOLD_S}}
"""The starts each checkpoint is run from (`evaluate`'s arguments): the reference's first frame, and
standing after a hold of HOLD_S s as the DDS check starts the robot."""


@dataclass(frozen=True)
class ScreenSettings:
    """What a screen's rows depend on (rows evaluated under other settings are redone)."""

    motion: Optional[str]
    """The motion the policies run along (None: each contract's)."""
    seeds: int
    """MuJoCo runs per checkpoint and start."""
    duration_s: float
    """Length of each run [s]."""


def run_checkpoints(run_dir: Path, every: int = 1) -> List[Path]:
    """RUN_DIR/checkpoints/iter_*.pt whose iteration is a multiple of `every`, oldest first;
    CheckpointError naming the folder when there is none."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    found = [p for p in checkpoints_in(folder) if checkpoint_iteration(p) % every == 0]
    if not found:
        raise CheckpointError(f"run {run_dir}: no checkpoint iter_*.pt in {folder}"
                              + (f" at a multiple of {every} iterations" if every > 1 else ""))
    return found


def file_stamp(path: Path) -> str:
    """'<bytes>:<modification time in ns>' of `path`: a checkpoint written again gets a new one."""
    st = Path(path).stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def screen_row(policy: Path, iteration: int, settings: ScreenSettings, motion_dir: Optional[str],
               model: Optional[str], log=None) -> Dict[str, object]:
    """One checkpoint's row: {iteration, falls_<start>, time_up_s, tracking_cm, tracking_root_xy_cm,
    self_contact_s, root_offset_m} (on the reference start, means over seeds: time up to the fall or the
    end, tracking up to then, legs touching, the root's horizontal distance from the reference's at
    the end)."""
    row: Dict[str, object] = {"iteration": iteration}
    for start, kwargs in STARTS.items():
        result = evaluate(policy, settings.motion, settings.seeds, settings.duration_s, model=model, log=log,
                          motion_dir=motion_dir, warp=False, **kwargs)
        summary = result["summary"]
        row[f"falls_{start}"] = summary["falls_mujoco"]
        if start == "reference":
            times = [r["fall_time_s"] if r["fell"] else settings.duration_s for r in result["runs"]["mujoco"]]
            row.update(time_up_s=sum(times) / len(times), tracking_cm=summary["tracking_error_mujoco_cm"],
                       tracking_root_xy_cm=summary["tracking_error_root_xy_mujoco_cm"],
                       self_contact_s=summary["self_contact_mujoco_s"],
                       root_offset_m=summary["final_root_offset_mujoco_m"])
    return row


def pick(rows: Sequence[Dict[str, object]]) -> Optional[Dict[str, object]]:
    """The row that fell from no start with the lowest world tracking error (None when all fell)."""
    standing = [r for r in rows if all(r[f"falls_{s}"] == 0 for s in STARTS)]
    return min(standing, key=lambda r: r["tracking_cm"]) if standing else None


def markdown(run_dir: Path, settings: ScreenSettings, rows: Sequence[dict], best: Optional[dict]) -> str:
    n = settings.seeds
    lines = [f"# Checkpoints of `{run_dir.name}` in MuJoCo",
             "",
             f"{n} seed(s) x {settings.duration_s:g} s per start (`bcg-eval --mujoco-only`: on the reference; "
             f"`--from-rest --hold {HOLD_S:g}`: after a hold); motion: "
             f"{settings.motion or 'the one in each contract'}.",
             "",
             "| iteration | falls on the reference | falls after a hold | time up [s] | world tracking [cm] | "
             "without the drift [cm] | legs touching [s] | root off the reference's at the end [m] |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = " **pick**" if best is not None and r["iteration"] == best["iteration"] else ""
        lines.append(f"| {r['iteration']}{mark} | {r['falls_reference']}/{n} | {r['falls_hold']}/{n} | "
                     f"{r['time_up_s']:.1f} | {r['tracking_cm']:.1f} | {r['tracking_root_xy_cm']:.1f} | "
                     f"{r['self_contact_s']:.2f} | {r.get('root_offset_m', float('nan')):.2f} |")
    lines.append("")
    lines.append(f"Pick: {pick_line(run_dir, best)}")
    return "\n".join(lines) + "\n"


def pick_line(run_dir: Path, best: Optional[dict]) -> str:
    if best is None:
        return "none: every checkpoint fell from one of the starts"
    checkpoint = run_dir / CHECKPOINT_DIR / checkpoint_name(int(best["iteration"]))
    return (f"iteration {best['iteration']} ({best['tracking_cm']:.1f} cm in the world frame); ship it with "
            f"`bcg-ship {checkpoint} --out policies`")


def screen(run_dir: Path, settings: ScreenSettings, out: Path, every: int = 1, motion_dir: Optional[str] = None,
           model: Optional[str] = None, log=None) -> dict:
    """Screen the run's checkpoints (see the module docstring); returns what OUT/screen.json holds.
    Raises CheckpointError, ExportError, PolicyFileError, MotionFileError or ValueError."""
    from ..export import export_checkpoint  # torch and onnx: loaded once there is something to screen
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "screen.json"
    known: Dict[int, dict] = {}
    if saved.is_file():
        old = json.loads(saved.read_text())
        if old.get("settings") == asdict(settings):
            known = {int(r["iteration"]): r for r in old["rows"]}
    report = {"run": str(run_dir), "settings": asdict(settings), "rows": []}
    for checkpoint in run_checkpoints(run_dir, every):
        iteration, stamp = checkpoint_iteration(checkpoint), file_stamp(checkpoint)
        if known.get(iteration, {}).get("checkpoint_stamp") != stamp:     # new, or the file was written again
            policy, _ = export_checkpoint(checkpoint, out / checkpoint_name(iteration).replace(".pt", ".onnx"))
            if log:
                log(f"iteration {iteration}: {policy}")
            known[iteration] = {**screen_row(policy, iteration, settings, motion_dir, model, log),
                                "checkpoint_stamp": stamp}
            report["rows"].append(known[iteration])
            write_text_atomic(saved, json.dumps(report, indent=2))  # each row kept as soon as it is measured
        else:
            report["rows"].append(known[iteration])
    present = {int(r["iteration"]) for r in report["rows"]}
    report["rows"] = sorted(report["rows"] + [r for i, r in known.items() if i not in present],   # pruned since
                            key=lambda r: int(r["iteration"]))
    rows = report["rows"]
    best = report["pick"] = pick(rows)
    write_text_atomic(saved, json.dumps(report, indent=2))
    write_text_atomic(out / "screen.md", markdown(run_dir, settings, rows, best))
    return report


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="bcg-screen", description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="run folder (its checkpoints/ are screened)")
    p.add_argument("--motion", help="motion to run along (default: each checkpoint's contract's)")
    p.add_argument("--motion-dir", help="folder of the named segments' motion files (default: $BCG_MOTION_DIR)")
    p.add_argument("--seeds", type=int, default=2, help="MuJoCo runs per checkpoint and start (default 2)")
    p.add_argument("--duration", type=float, default=15.0, help="seconds per run (default 15)")
    p.add_argument("--every", type=int, default=1, help="only checkpoints at multiples of this iteration")
    p.add_argument("--out", type=Path, help="folder for the exports and screen.json/md (default RUN/screen)")
    p.add_argument("--model", help="G1 MuJoCo XML (default: $BCG_G1_MODEL)")
    args = p.parse_args(argv)
    from ..export import ExportError
    if args.seeds < 1 or args.duration <= 0 or args.every < 1:
        print("bcg-screen: --seeds and --every must be >= 1 and --duration > 0", file=sys.stderr)
        return 2
    settings = ScreenSettings(args.motion, args.seeds, args.duration)
    try:
        report = screen(args.run, settings, args.out or args.run / "screen", args.every, args.motion_dir, args.model,
                        log=lambda line: print(f"bcg-screen: {line}", file=sys.stderr, flush=True))
    except (CheckpointError, ExportError, PolicyFileError, MotionFileError, ValueError) as e:
        print(f"bcg-screen: {e}", file=sys.stderr)
        return 2
    print(markdown(args.run, settings, report["rows"], report["pick"]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
