"""Jump: a series of two-footed jumps (in place, forward, back, sideways), each with a
counter-movement, a push at constant acceleration, a ballistic flight and a landing that absorbs
the fall at constant deceleration, then standing up and a pause."""
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from .choreography import SIDE_SIGN, Choreography, Stance, add_step
from .profiles import GRAVITY, hermite_path, keyframes

DIRECTIONS = {"up": (0.0, 0.0), "forward": (1.0, 0.0), "back": (-0.6, 0.0), "left": (0.0, 0.6), "right": (0.0, -0.6)}
"""Jump kinds -> horizontal direction, as a fraction of `JumpConfig.distance` (x forward, y left)."""


@dataclass(frozen=True)
class JumpConfig:
    """The jumps' shape; times in s, lengths in m, angles in rad."""

    duration_s: float = 15.0
    height: float = 0.3
    """m, rise of the root from take-off to the top of the flight."""
    distance: float = 0.35
    """m, root travel of a forward jump (others: a fraction of it, see DIRECTIONS)."""
    stand_height: float = 0.75
    """m, root height standing."""
    crouch_height: float = 0.58
    """m, root height at the bottom of the counter-movement and of the landing."""
    take_off_height: float = 0.74
    """m, root height when the feet leave the floor (legs nearly straight)."""
    crouch_s: float = 0.6
    """s, from standing to the bottom of the counter-movement."""
    rise_s: float = 0.6
    """s, from the bottom of the landing back to standing."""
    pause_s: float = 0.5
    """s standing between jumps (and at least this long at the start and end)."""
    half_width: float = 0.11
    """m, lateral distance of each foot from the root."""
    tuck: float = 0.1
    """m, feet drawn up at the top of the flight."""
    lean: float = 0.35
    """rad, forward pitch of the root at the bottom of a crouch."""
    sit_back: float = 0.04
    """m, the root moves back over the heels at the bottom of a crouch."""
    kinds: Tuple[str, ...] = ("up", "forward", "left", "back", "right")
    """Jump kinds to draw from (DIRECTIONS); the first jump is always the first kind."""


def choreography(config: JumpConfig, rng: np.random.Generator) -> Choreography:
    """As many jumps as fit into the duration, kinds drawn by `rng` after the first."""
    c = config
    v0 = np.sqrt(2 * GRAVITY * c.height)                                 # take-off speed, m/s
    push_s = 2 * (c.take_off_height - c.crouch_height) / v0             # constant acceleration to v0
    flight_s = 2 * v0 / GRAVITY
    land_s = 2 * (c.take_off_height - c.crouch_height) / v0
    cycle = c.crouch_s + push_s + flight_s + land_s + c.rise_s + c.pause_s
    count = int((c.duration_s - c.pause_s) // cycle)
    if count < 1:
        raise ValueError(f"duration_s: {c.duration_s} s is too short for one jump ({cycle + c.pause_s:.2f} s)")
    kinds = [c.kinds[0]] + list(rng.choice(c.kinds, size=count - 1))
    root = np.zeros(2)
    z, x, y = [(0.0, c.stand_height, 0.0)], [(0.0, 0.0, 0.0)], [(0.0, 0.0, 0.0)]
    pitch_t, pitch = [0.0], [0.0]
    arm_t, arm = [0.0], [0.0]
    feet = {side: [Stance(-1.0, np.inf, 0.0, SIDE_SIGN[side] * c.half_width, 0.0)] for side in ("left", "right")}
    t = c.pause_s
    for kind in kinds:
        travel = c.distance * np.array(DIRECTIONS[kind])
        speed = travel / (push_s / 2 + flight_s + land_s / 2)           # horizontal, constant in flight
        t_low, t_off = t + c.crouch_s, t + c.crouch_s + push_s
        t_land, t_absorbed = t_off + flight_s, t_off + flight_s + land_s
        t_up = t_absorbed + c.rise_s
        z += [(t, c.stand_height, 0.0), (t_low, c.crouch_height, 0.0), (t_off, c.take_off_height, v0),
              (t_land, c.take_off_height, -v0), (t_absorbed, c.crouch_height, 0.0), (t_up, c.stand_height, 0.0)]
        start = root.copy()
        for path, axis in ((x, 0), (y, 1)):
            at_off = start[axis] + speed[axis] * push_s / 2
            at_land = at_off + speed[axis] * flight_s
            back = c.sit_back if axis == 0 else 0.0
            path += [(t, start[axis], 0.0), (t_low, start[axis] - back, 0.0), (t_off, at_off, speed[axis]),
                     (t_land, at_land, speed[axis]), (t_absorbed, start[axis] + travel[axis] - back, 0.0),
                     (t_up, start[axis] + travel[axis], 0.0)]
        root += travel
        pitch_t += [t, t_low, t_off, t_land, t_absorbed, t_up]
        pitch += [0.0, c.lean, 0.05, 0.05, 0.7 * c.lean, 0.0]
        arm_t += [t, t_low - 0.1, t_off + 0.15, t_land, t_absorbed, t_up]
        arm += [0.0, 1.0, -1.0, -0.6, 0.3, 0.0]                         # arm swing: + back, - forward/up
        for side, stances in feet.items():
            y_foot = float(root[1] + SIDE_SIGN[side] * c.half_width)
            add_step(stances, t_off, t_land, float(root[0]), y_foot, 0.0, clearance=c.tuck, follow_root=True)
        t = t_up + c.pause_s
    paths = [hermite_path(p) for p in (x, y, z)]
    pitch_signal, arm_signal = keyframes(pitch_t, pitch), keyframes(arm_t, arm)

    def root_pos(times):
        return np.column_stack([p(times) for p in paths])

    def root_rpy(times):
        return np.column_stack([np.zeros_like(times), pitch_signal(times), np.zeros_like(times)])

    joints = {"waist_pitch_joint": lambda times: 0.3 * pitch_signal(times)}
    for side in ("left", "right"):
        joints[f"{side}_shoulder_pitch_joint"] = lambda times: 0.2 + arm_signal(times)
        joints[f"{side}_elbow_joint"] = lambda times: 0.6 + 0.4 * arm_signal(times) ** 2
    return Choreography(c.duration_s, {s: tuple(v) for s, v in feet.items()}, root_pos, root_rpy, joints)

