"""MuJoCo screening of a run's checkpoints while it trains, in a separate process at low priority.

Every `runner.screen_every` iterations the runner starts `bcg-screen RUN --every K --seeds S`
(`evaluation.screen`, unless one is still running: the next one catches up) and training goes on.
Each checkpoint screened is exported and run in MuJoCo from the reference's first frame and after a
hold (RUN/screen/screen.json, screen.md); each screened row reaches TensorBoard as `mujoco/*` (time
up, world tracking, tracking without the drift, falls from each start) at its checkpoint's iteration,
and the newest one metrics.csv (in the row of the iteration it arrived at; mujoco/iteration names the
checkpoint) and the console. The pick so far (the standing checkpoint that tracks best) is never pruned. Nothing here
imports the evaluation code: it runs in its own process.
"""
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

SCREEN_DIR = "screen"
SCREEN_FILE = "screen.json"
LOGGED = ("time_up_s", "tracking_cm", "tracking_root_xy_cm", "falls_reference", "falls_hold")
"""The columns of a screened row logged as mujoco/<column>."""


def read_screen(run_dir: Path) -> Optional[dict]:
    """RUN/screen/screen.json as written by `bcg-screen` (None when absent or being replaced)."""
    path = Path(run_dir) / SCREEN_DIR / SCREEN_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def row_metrics(row: dict) -> Dict[str, float]:
    """A screened row as log columns: mujoco/iteration (the checkpoint's), mujoco/time_up_s, ..."""
    return {"mujoco/iteration": float(row["iteration"]), **{f"mujoco/{k}": float(row[k]) for k in LOGGED}}


def screened_after_pick(report: Optional[dict]) -> Optional[int]:
    """How many checkpoints were screened after the pick (None while there is no pick)."""
    best = (report or {}).get("pick")
    if not best:
        return None
    return sum(int(r["iteration"]) > int(best["iteration"]) for r in report.get("rows") or [])


def protected_iterations(report: Optional[dict]) -> Set[int]:
    """Checkpoints that pruning keeps: the screen's pick so far."""
    best = (report or {}).get("pick")
    return {int(best["iteration"])} if best else set()


class BackgroundScreen:
    """Screens RUN's checkpoints at multiples of `every` iterations with `seeds` MuJoCo seeds, in a
    `nice -n 10` subprocess. `start` begins a screening unless one runs; `poll` returns the rows
    screened since it last returned any, once a screening has finished (as `row_metrics`, oldest
    first; empty otherwise); `finish` waits, screens whatever is left and returns the same; `report` is
    what screen.json holds, read again only when it changed."""

    def __init__(self, run_dir: Path, every: int, seeds: int):
        self.run_dir = Path(run_dir)
        self.command = ["nice", "-n", "10", sys.executable, "-m", "bcg_train.evaluation.screen", str(run_dir),
                        "--every", str(every), "--seeds", str(seeds)]
        self._process: Optional[subprocess.Popen] = None
        self._reported: Set[int] = set()
        self.log_path = self.run_dir / SCREEN_DIR / "screen.log"
        self._report: Optional[dict] = None
        self._stamp: Optional[Tuple[int, int, int]] = None
        """(inode, mtime in ns, size in bytes) of screen.json when `_report` was read from it."""

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        if self.running:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as log:
            self._process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)

    def poll(self) -> List[Dict[str, float]]:
        if self._process is None or self.running:
            return []
        self._process = None
        rows = sorted(((read_screen(self.run_dir) or {}).get("rows") or []), key=lambda r: int(r["iteration"]))
        new = [r for r in rows if int(r["iteration"]) not in self._reported]
        self._reported.update(int(r["iteration"]) for r in new)
        return [row_metrics(r) for r in new]

    def report(self) -> Optional[dict]:
        """What RUN/screen/screen.json holds (`read_screen`), read again only when the file changed since
        (its inode, mtime or size: the screening replaces it as it measures each row), so that asking
        every iteration costs a stat."""
        try:
            stat = (self.run_dir / SCREEN_DIR / SCREEN_FILE).stat()
        except OSError:
            return None
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._report = read_screen(self.run_dir)
            self._stamp = stamp if self._report is not None else None     # unreadable: read it again next time
        return self._report

    def finish(self) -> List[Dict[str, float]]:
        """Wait for a running screening, screen what is left, and return the rows not yet returned."""
        self.wait()
        self.start()
        self.wait()
        return self.poll()

    def wait(self) -> None:
        if self._process is not None:
            self._process.wait()
