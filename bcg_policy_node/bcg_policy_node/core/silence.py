"""Saying so when no LowState arrives at all: the node is on another domain or interface than the
robot or simulator, or nothing is running. Time is an argument (s, monotonic)."""
from typing import Optional

SILENCE_NOTICE_S = 2.0
"""s without any LowState (valid or dropped) before the node says so, and between two repeats."""


class SilenceWatch:
    """`update(now, arrived)` at every receiver wake-up; returns the line to log, or None.

    `where`: the endpoint in words ('domain 0, interface eth0 (direct Cyclone DDS, rt/lowstate)').
    The notice repeats every `interval_s` while nothing arrives and stops for good at the first
    LowState (a robot that goes quiet later is the staleness check's business).
    """

    def __init__(self, where: str, start_s: float, interval_s: float = SILENCE_NOTICE_S):
        self.where, self.interval_s = where, interval_s
        self._since = self._next = start_s
        self._next += interval_s
        self.heard = False

    def update(self, now: float, arrived: bool) -> Optional[str]:
        if self.heard or arrived:
            self.heard = True
            return None
        if now < self._next:
            return None
        self._next = now + self.interval_s
        return (f"No LowState in {now - self._since:.0f} s on {self.where}: is the robot or simulator on this "
                "domain? (its domain and interface: `domain`, `interface`; Unitree's simulator: DOMAIN_ID, "
                "INTERFACE in its config.py)")
