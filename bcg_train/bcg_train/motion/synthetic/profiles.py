"""Smooth 1-D building blocks of the synthetic motions (time in s, values in m or rad)."""
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

Signal = Callable[[np.ndarray], np.ndarray]
"""A function of times (T,) s returning values (T,) or (T, k)."""

GRAVITY = 9.81
"""m/s^2."""


def min_jerk(s: np.ndarray) -> np.ndarray:
    """0 -> 1 over s in [0, 1] with zero velocity and acceleration at both ends (clamped outside)."""
    s = np.clip(s, 0.0, 1.0)
    return s ** 3 * (10 - 15 * s + 6 * s ** 2)


def bump(s: np.ndarray) -> np.ndarray:
    """0 -> 1 (at s = 0.5) -> 0 over s in [0, 1], zero velocity and acceleration at both ends; 0 outside."""
    s = np.clip(s, 0.0, 1.0)
    return 64.0 * (s * (1 - s)) ** 3


def keyframes(times: Sequence[float], values: Sequence) -> Signal:
    """Shape-preserving cubic (PCHIP) through (times, values): C1, never overshoots the keyframe values
    (so keyframes inside the joint limits stay inside); held constant before the first and after the last."""
    from scipy.interpolate import PchipInterpolator  # here: naming the built-in motions loads no scipy
    times = np.asarray(times, float)
    spline = PchipInterpolator(times, np.asarray(values, float), axis=0)
    return lambda t: spline(np.clip(t, times[0], times[-1]))


def hermite_path(knots: Sequence[Tuple[float, float, float]]) -> Signal:
    """C1 piecewise cubic through knots (t s, position, velocity /s), continued linearly (with the end
    velocity) before the first and after the last. A segment whose end knots lie on one parabola
    is that parabola: two knots (t0, h, v) and (t0 + 2 v / g, h, -v) give the ballistic flight
    under gravity g, and a stance between two such flights gets a constant upward acceleration."""
    from scipy.interpolate import CubicHermiteSpline
    t, p, v = (np.array(column, float) for column in zip(*sorted(knots)))
    spline = CubicHermiteSpline(t, p, v)

    def signal(times):
        times = np.asarray(times, float)
        before, after = p[0] + v[0] * (times - t[0]), p[-1] + v[-1] * (times - t[-1])
        return np.where(times < t[0], before, np.where(times > t[-1], after, spline(np.clip(times, t[0], t[-1]))))
    return signal


class Tracks:
    """Named keyframe channels (time s, value) written move by move; `signal` interpolates a
    channel with `keyframes`. A later key at the same time replaces an earlier one."""

    def __init__(self, start: Dict[str, float]):
        self._keys: Dict[str, List[Tuple[float, float]]] = {name: [(0.0, value)] for name, value in start.items()}

    def add(self, t0: float, keys: Dict[str, Sequence[Tuple[float, float]]]) -> None:
        """For each channel, keys (dt, value) at times t0 + dt."""
        for name, channel in keys.items():
            self._keys[name] += [(t0 + dt, value) for dt, value in channel]

    def last(self, name: str) -> float:
        """The value of the channel's latest key."""
        return max(self._keys[name], key=lambda k: k[0])[1]

    def signal(self, name: str) -> Signal:
        keys = dict(sorted(self._keys[name], key=lambda k: k[0]))
        if len(keys) == 1:                    # never moved
            return lambda t: np.full(np.shape(t), keys[0])
        return keyframes(list(keys), list(keys.values()))
