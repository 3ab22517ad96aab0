"""The node's phase clock from the LowStates themselves (`lowstate_clock`), for a simulator that
sends no tick (Unitree's: tick always 0) and may run slower than real time.

A robot delivers its LowStates at a fixed period, so there "fresh LowStates received x their period"
is the wall time; in a simulator that steps slower than real time it is the simulated time. The
ramp, hold and blend (and the policy's schedule) then run on simulated time, as they do on a robot's
wall time, instead of `1 / real-time factor` faster. A LowState identical to the one before it
(a simulator that republishes its state between two physics steps) is not fresh and does not
advance the clock. Staleness stays on the wall clock (the runtime and the writer check it there).
"""
from typing import Optional

import numpy as np


def state_fingerprint(state: np.void) -> bytes:
    """What changes with every physics step of a LowState: its motor and IMU states (a copy)."""
    return state["motor_state"].tobytes() + state["imu_state"].tobytes()


def advance_state_clock(t: Optional[float], fresh: bool, period_s: float) -> float:
    """The clock after one LowState: 0 at the first, + `period_s` for every fresh one after it."""
    if t is None:
        return 0.0
    return t + period_s if fresh else t


class LowStateClock:
    """Simulated s from the LowStates received (`advance_state_clock`); `now` None before any."""

    def __init__(self, period_s: float):
        if not period_s > 0:
            raise ValueError(f"LowState period must be > 0, got {period_s}")
        self.period_s = float(period_s)
        self.now: Optional[float] = None
        self._last: Optional[bytes] = None

    def on_state(self, state: np.void) -> float:
        """Advance by one LowState `state` and return the clock's time at it."""
        key = state_fingerprint(state)
        self.now = advance_state_clock(self.now, key != self._last, self.period_s)
        self._last = key
        return self.now
