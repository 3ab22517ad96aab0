"""Per-iteration training logs: a CSV file, TensorBoard scalars and a progress line with ETA.

On resume from iteration k, rows after k (written before the interruption) are dropped from the
CSV and TensorBoard purges its events after k, so the logs read as one uninterrupted run.
"""
import csv
import io
import math
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, TextIO

from bcg.atomic_file import write_atomic

CSV_NAME = "metrics.csv"
TENSORBOARD_DIR = "tensorboard"
ITERATION = "iteration"
"""Column: iterations completed (1 for the first)."""


class MetricsLog:
    """metrics.csv (one row per iteration, columns grow as new metrics appear) and TensorBoard."""

    def __init__(self, run_dir: Path, resumed_at: int = 0):
        self.path = Path(run_dir) / CSV_NAME
        self.columns: List[str] = []
        rows = self._read_rows(resumed_at)
        self._rewrite(rows)
        from torch.utils.tensorboard import SummaryWriter
        self.writer = SummaryWriter(str(Path(run_dir) / TENSORBOARD_DIR),
                                    purge_step=resumed_at + 1 if resumed_at else None)

    def _read_rows(self, resumed_at: int) -> List[dict]:
        if not resumed_at or not self.path.is_file():
            return []
        with open(self.path, newline="") as f:
            reader = csv.DictReader(f)
            self.columns = list(reader.fieldnames or [])
            return [r for r in reader if int(float(r[ITERATION])) <= resumed_at]

    def _rewrite(self, rows: List[dict]) -> None:
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, self.columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
        write_atomic(self.path, lambda f: f.write(text.getvalue().encode()))

    def write(self, row: Dict[str, float]) -> None:
        """Append one iteration's row (must contain ITERATION) and send it to TensorBoard."""
        new = [k for k in row if k not in self.columns]
        if new:
            with open(self.path, newline="") as f:
                rows = list(csv.DictReader(f))
            self.columns += new
            self._rewrite(rows)
        with open(self.path, "a", newline="") as f:
            csv.DictWriter(f, self.columns, restval="").writerow({k: str(v) if isinstance(v, int) else repr(float(v))
                                                                 for k, v in row.items()})
        step = int(row[ITERATION])
        for k, v in row.items():
            if k != ITERATION and math.isfinite(v):
                self.writer.add_scalar(k, v, step)

    def write_screened(self, rows: List[Dict[str, float]]) -> None:
        """Screened checkpoints' rows (`background_screen.row_metrics`) to TensorBoard, each at its
        checkpoint's iteration."""
        for row in rows:
            step = int(row["mujoco/iteration"])
            for k, v in row.items():
                if k != "mujoco/iteration" and math.isfinite(v):
                    self.writer.add_scalar(k, v, step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """A one-line progress bar with ETA on stderr (redrawn in place on a terminal, one line per
    iteration otherwise). The ETA uses the mean time per iteration since this process started."""

    def __init__(self, label: str, total: int, start: int, stream: Optional[TextIO] = None, width: int = 24):
        self.label, self.total, self.start, self.width = label, total, start, width
        self.stream = stream or sys.stderr
        self.t0 = time.monotonic()

    def update(self, done: int, summary: str) -> None:
        elapsed = time.monotonic() - self.t0
        per_it = elapsed / max(done - self.start, 1)
        filled = int(self.width * done / self.total)
        bar = "#" * filled + "-" * (self.width - filled)
        line = (f"[{self.label}] {done}/{self.total} [{bar}] {100.0 * done / self.total:5.1f}% "
                f"{per_it:.2f} s/it ETA {format_duration(per_it * (self.total - done))} | {summary}")
        tty = self.stream.isatty()
        self.stream.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        if tty and done == self.total:
            self.stream.write("\n")
        self.stream.flush()
