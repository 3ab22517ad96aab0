"""Dropped and rejected messages, reported the same way by both nodes: the first one of each reason
at once (with what it means and what to do), then a summary at most every `interval_s` while more
follow (or at once when the caller flushes: its situation changed, or it stops), and the totals by
reason at the end (the stop summary, the mujoco_check verdict). Time is an argument."""
from typing import Dict, Mapping, Optional

SUMMARY_INTERVAL_S = 5.0
"""s between two summaries of further drops."""


class DropLog:
    """Follows cumulative counters by reason (a reader's `dropped`, a gate's `rejected`) and says what to log.

    `what`: the message kind ('LowState'); `reasons`: reason -> what it means and what to do
    ('CRC mismatch (a simulator that sends crc 0? ...)'). Counters of other names are ignored.
    """

    def __init__(self, what: str, reasons: Mapping[str, str], verb: str = "dropped",
                 interval_s: float = SUMMARY_INTERVAL_S):
        self.what, self.reasons, self.verb, self.interval_s = what, dict(reasons), verb, interval_s
        self.totals: Dict[str, int] = dict.fromkeys(reasons, 0)
        """Cumulative count by reason, as last seen."""
        self._pending: Dict[str, int] = dict.fromkeys(reasons, 0)
        """Counted since the last line logged."""
        self._reported_at: Optional[float] = None
        """Time of the last line logged (None: nothing was dropped yet)."""

    def update(self, counts: Mapping[str, int], now: float, flush: bool = False) -> Optional[str]:
        """Take the cumulative `counts` seen at time `now` (s); the line to log now, or None. A reason
        seen for the first time is named at once (its first drop); `flush`: what is pending too."""
        first = []
        for reason in self.reasons:
            new = int(counts.get(reason, self.totals[reason])) - self.totals[reason]
            if new > 0:
                if self.totals[reason] == 0:
                    first.append(reason)
                    new -= 1
                self.totals[reason] += new + (reason in first)
                self._pending[reason] += new
        if first:
            self._reported_at = now
            return (f"{self.what} {self.verb}: " + "; ".join(self.reasons[r] for r in first)
                    + f"; further ones are summarised every {self.interval_s:g} s")
        last = self._reported_at          # None: nothing was dropped yet, so nothing is pending
        if last is None or not (flush or now - last >= self.interval_s) or not any(self._pending.values()):
            return None
        line = self._summary(now - last)
        self._pending = dict.fromkeys(self.reasons, 0)
        self._reported_at = now
        return line

    def _summary(self, span_s: float) -> str:
        counts = {r: n for r, n in self._pending.items() if n}
        parts = ([self.reasons[r] for r in counts] if len(counts) == 1 else
                 [f"{n:,} {self.reasons[r]}" for r, n in counts.items()])
        span = f"{span_s:.0f}" if span_s >= 1 else f"{span_s:.2f}"
        return f"{sum(counts.values()):,} {self.what}s {self.verb} in {span} s: " + "; ".join(parts)

    def __str__(self) -> str:
        """The totals for a stop summary: 'none', or '1,250 (crc 1,250)'."""
        total = sum(self.totals.values())
        if not total:
            return "none"
        return f"{total:,} (" + ", ".join(f"{r} {n:,}" for r, n in self.totals.items() if n) + ")"
