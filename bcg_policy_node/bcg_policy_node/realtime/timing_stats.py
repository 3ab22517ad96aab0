"""Duration samples of the node's time-critical paths, summarised as median / p99 / max."""
import collections
from typing import Optional

import numpy as np

MAX_SAMPLES = 200_000
"""Newest samples kept per statistic (at 500 Hz: the last 400 s)."""


class TimingStats:
    """Durations in seconds; `summary()` reports them in milliseconds."""

    def __init__(self):
        self._values = collections.deque(maxlen=MAX_SAMPLES)

    def add(self, seconds: float) -> None:
        self._values.append(seconds)

    def summary(self) -> Optional[dict]:
        """{'n', 'median_ms', 'p99_ms', 'max_ms'}, or None without samples."""
        if not self._values:
            return None
        a = np.asarray(self._values, float) * 1e3
        return {"n": int(a.size), "median_ms": float(np.median(a)), "p99_ms": float(np.percentile(a, 99)),
                "max_ms": float(a.max())}
