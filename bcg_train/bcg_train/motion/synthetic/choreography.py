"""What a synthetic motion is made of: where each foot is planted when, the root path and the
upper-body joints, all as functions of time; and the foot paths that follow from them."""
from dataclasses import dataclass, replace
from typing import Dict, Iterator, List, Sequence, Tuple

import numpy as np

from .profiles import Signal, bump, min_jerk

FOLLOW_BLEND_S = 0.1
"""s over which a root-following swing foot's velocity blends from the ground's (zero) into the root's."""

SIDE_SIGN = {"left": 1.0, "right": -1.0}
"""+1 for the left foot / arm, -1 for the right (the robot's y axis points left)."""

SWING_RELAX = 0.25
"""Fraction of a swing over which the foot goes from level to relaxed (and back before touch-down)."""


@dataclass(frozen=True)
class Stance:
    """A foot flat on the floor from t_on to t_off (s): its origin at (x, y) m, heading yaw (rad)."""

    t_on: float
    t_off: float
    x: float
    y: float
    yaw: float
    clearance: float = 0.08
    """m, how high the sole rises in the middle of the swing that ends in this stance."""
    reach: Tuple[float, float] = (0.0, 0.0)
    """m, world (x, y) the foot reaches beyond the straight line in the middle of that swing (a kick)."""
    follow_root: bool = False
    """The swing that ends here is planned relative to the root (running, jumping): the foot moves
    from its offset to the root at lift-off to its offset at touch-down, so it never reaches further
    from the body than at those two instants. Otherwise it steps over the ground (walking, dancing)."""


@dataclass(frozen=True)
class Choreography:
    """A motion to synthesise. Stances of a side are in time order; the first starts at or before 0,
    the last ends at or after `duration_s`. Joints absent from `joints` (and not legs) hold the default pose."""

    duration_s: float
    stances: Dict[str, Tuple[Stance, ...]]
    """'left' / 'right' -> stances."""
    root_pos: Signal
    """times (T,) s -> (T, 3) m, root (pelvis) position, world."""
    root_rpy: Signal
    """times (T,) s -> (T, 3) rad, root roll, pitch, yaw; orientation Rz(yaw) Ry(pitch) Rx(roll)."""
    joints: Dict[str, Signal]
    """non-leg joint name -> times (T,) s -> (T,) rad."""

    def __post_init__(self):
        for side, stances in self.stances.items():
            if stances[0].t_on > 0 or stances[-1].t_off < self.duration_s:
                raise ValueError(f"{side} foot: stances must cover t = 0 and t = {self.duration_s} s")
            for a, b in zip(stances, stances[1:]):
                if not a.t_on <= a.t_off < b.t_on:
                    raise ValueError(f"{side} foot: stances {a} and {b} overlap or are out of order")

    def planted(self, side: str, times: np.ndarray) -> np.ndarray:
        """(T,) bool: the `side` foot is planted at each time."""
        times = np.asarray(times, float)
        return np.any([(times >= s.t_on) & (times <= s.t_off) for s in self.stances[side]], axis=0)

    def foot_path(self, side: str, times: np.ndarray,
                  sole_height: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The foot origin's position (T, 3) m, heading (T,) rad and swing weight (T,) in [0, 1].

        `sole_height` (m) is the origin's height when the foot rests flat on the floor. A stepping
        swing moves over the ground by min-jerk; a root-following swing moves its offset from the root
        by min-jerk between its lift-off and touch-down offsets, with its velocity blended to zero
        (the ground's) at both ends. Both lift the foot by `clearance` * bump. The swing weight is 0
        on the ground and rises smoothly to 1 after the first and falls back before the last
        `SWING_RELAX` of a swing: how much the foot may leave level to relax the ankle.
        """
        times = np.asarray(times, float)
        pos = np.zeros((len(times), 3))
        yaw = np.zeros(len(times))
        weight = np.zeros(len(times))
        stances = self.stances[side]
        for s in stances:
            on = (times >= s.t_on) & (times <= s.t_off)
            pos[on], yaw[on] = (s.x, s.y, sole_height), s.yaw
        for a, b in zip(stances, stances[1:]):
            on = (times > a.t_off) & (times < b.t_on)
            t = times[on]
            s = (t - a.t_off) / (b.t_on - a.t_off)
            start, end = np.array([a.x, a.y, sole_height]), np.array([b.x, b.y, sole_height])
            yaw[on] = a.yaw + np.angle(np.exp(1j * (b.yaw - a.yaw))) * min_jerk(s)
            weight[on] = min_jerk(s / SWING_RELAX) * min_jerk((1 - s) / SWING_RELAX)
            lift = np.outer(bump(s), [b.reach[0], b.reach[1], b.clearance])
            if not b.follow_root:
                pos[on] = start + np.outer(min_jerk(s), end - start) + lift
                continue
            root_a, root_b = self.root_pos(np.array([a.t_off, b.t_on]))
            vel_a, vel_b = self._root_velocity(a.t_off), self._root_velocity(b.t_on)
            offset = (start - root_a) + np.outer(min_jerk(s), (end - root_b) - (start - root_a)) + lift
            blend = min(FOLLOW_BLEND_S, (b.t_on - a.t_off) / 3)
            offset -= np.outer(_velocity_blend(t - a.t_off, blend), vel_a)
            offset += np.outer(_velocity_blend(b.t_on - t, blend), vel_b)
            pos[on] = self.root_pos(t) + offset
            pos[on, 2] = np.maximum(pos[on, 2], sole_height)   # a short flight's blend could graze the floor
        return pos, yaw, weight

    def _root_velocity(self, t: float, h: float = 1e-6) -> np.ndarray:
        p = self.root_pos(np.array([t - h, t + h]))
        return (p[1] - p[0]) / (2 * h)


def _velocity_blend(u: np.ndarray, width: float) -> np.ndarray:
    """u (1 - u / width)^2 for 0 <= u < width, else 0: slope 1 at u = 0, zero value and slope at u = width."""
    return np.where((u >= 0) & (u < width), u * (1 - u / width) ** 2, 0.0)


def shuffled_rounds(rng: np.random.Generator, items: Sequence[str]) -> Iterator[str]:
    """Endless draws: all of `items` (repeats allowed) in an order shuffled by `rng`, round after round,
    so every item shows up in a short motion."""
    while True:
        yield from (str(items[i]) for i in rng.permutation(len(items)))


def add_step(stances: List[Stance], t_lift: float, t_land: float, x: float, y: float, yaw: float,
             clearance: float = 0.05, reach: Tuple[float, float] = (0.0, 0.0), follow_root: bool = False) -> None:
    """End the last of `stances` at t_lift (s) and plant the foot again at t_land at (x, y) m, heading
    yaw (rad), until a later step lifts it (t_off = inf); the swing as `Stance` says."""
    stances[-1] = replace(stances[-1], t_off=t_lift)
    stances.append(Stance(t_land, np.inf, x, y, yaw, clearance, reach, follow_root))
