"""Fight: a boxer's guard on staggered feet with a light bounce, and a random sequence of
jabs, crosses, uppercuts, weaves, shuffle steps forward and back, and front kicks."""
from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

from .choreography import SIDE_SIGN, Choreography, Stance, add_step, shuffled_rounds
from .profiles import Tracks

GUARD = {"left_shoulder_pitch_joint": -0.6, "left_shoulder_roll_joint": 0.3, "left_elbow_joint": -0.6,
         "right_shoulder_pitch_joint": -0.6, "right_shoulder_roll_joint": -0.3, "right_elbow_joint": -0.6,
         "waist_yaw_joint": 0.4, "waist_roll_joint": 0.0, "waist_pitch_joint": 0.1}
"""Joint angles (rad) of the guard: fists by the chin, torso turned square to the front."""



@dataclass(frozen=True)
class FightConfig:
    """The fight's shape; times in s, lengths in m, angles in rad."""

    duration_s: float = 15.0
    height: float = 0.71
    """m, root height in the guard."""
    stagger: Tuple[float, float] = (0.12, 0.13)
    """m, (forward, left) of the lead (left) foot from the root; the rear foot mirrors it."""
    foot_yaw: float = -0.3
    """rad, both feet turned to the right."""
    hip_yaw: float = -0.4
    """rad, root heading in the guard (the waist turns the torso back to the front)."""
    bounce: float = 0.01
    """m, root bob amplitude at 2 bounces/s."""
    step: float = 0.2
    """m, length of a shuffle step."""
    pause_s: Tuple[float, float] = (0.25, 0.6)
    """s, range of the random pause in guard between moves."""
    moves: Tuple[str, ...] = ("jab", "jab", "cross", "cross", "uppercut", "weave", "forward", "back", "kick")
    """Moves dealt in shuffled rounds (a move listed twice comes twice per round)."""


def choreography(config: FightConfig, rng: np.random.Generator) -> Choreography:
    """Moves dealt by `rng` until the duration is filled, in guard between them."""
    c = config
    lead, rear = np.array(c.stagger), -np.array(c.stagger)
    root = np.zeros(2)
    tracks = Tracks({"x": 0.0, "y": 0.0, "z": 0.75, "yaw": 0.0, "pitch": 0.0, "roll": 0.0,
                     **{name: 0.0 for name in GUARD}})
    stand = {"left_shoulder_pitch_joint": 0.2, "left_shoulder_roll_joint": 0.2, "left_elbow_joint": 0.6,
             "right_shoulder_pitch_joint": 0.2, "right_shoulder_roll_joint": -0.2, "right_elbow_joint": 0.6}
    tracks.add(0.0, {name: [(0.0, value)] for name, value in stand.items()})
    tracks.add(0.0, {"z": [(1.0, c.height)], "yaw": [(1.0, c.hip_yaw)], **{n: [(1.0, v)] for n, v in GUARD.items()}})
    feet = {"left": [Stance(-1.0, np.inf, *lead, c.foot_yaw)], "right": [Stance(-1.0, np.inf, *rear, c.foot_yaw)]}
    t, end = 1.2, c.duration_s - 0.8
    for move in shuffled_rounds(rng, c.moves):
        length = _MOVE_S[move]
        if t + length > end:
            break
        if move in ("forward", "back"):
            sign = 1.0 if move == "forward" else -1.0
            order = ("left", "right") if sign > 0 else ("right", "left")
            for k, side in enumerate(order):
                last = feet[side][-1]
                add_step(feet[side], t + 0.3 * k, t + 0.3 * k + 0.2, last.x + sign * c.step, last.y, last.yaw, 0.04)
            tracks.add(t, {"x": [(0.0, root[0]), (0.55, root[0] + sign * c.step)]})
            root[0] += sign * c.step
        elif move == "kick":
            shift = root + 0.35 * lead                                  # toward the lead foot
            tracks.add(t, {"x": [(0.0, root[0]), (0.4, shift[0]), (1.0, shift[0]), (1.4, root[0])],
                           "y": [(0.0, root[1]), (0.4, shift[1]), (1.0, shift[1]), (1.4, root[1])],
                           "z": [(0.0, c.height), (0.4, c.height + 0.02), (1.0, c.height + 0.02), (1.4, c.height)],
                           "yaw": [(0.0, c.hip_yaw), (0.5, -0.2), (0.9, -0.2), (1.4, c.hip_yaw)],
                           "pitch": [(0.0, 0.0), (0.55, -0.12), (0.85, -0.12), (1.4, 0.0)],
                           "waist_yaw_joint": [(0.0, GUARD["waist_yaw_joint"]), (0.5, 0.2), (0.9, 0.2),
                                               (1.4, GUARD["waist_yaw_joint"])]})
            last = feet["right"][-1]
            add_step(feet["right"], t + 0.4, t + 1.0, last.x, last.y, last.yaw, clearance=0.4, reach=(0.7, 0.1))
        else:
            tracks.add(t, _UPPER_BODY[move](c))
        t += length + rng.uniform(*c.pause_s)
    signals = {name: tracks.signal(name) for name in ("x", "y", "z", "roll", "pitch", "yaw", *GUARD)}

    def root_pos(times):
        bob = c.bounce * np.sin(2 * np.pi * 2.0 * times) * np.clip(times - 1.0, 0.0, 1.0)
        return np.column_stack([signals["x"](times), signals["y"](times), signals["z"](times) + bob])

    def root_rpy(times):
        return np.column_stack([signals[k](times) for k in ("roll", "pitch", "yaw")])
    return Choreography(c.duration_s, {s: tuple(v) for s, v in feet.items()}, root_pos, root_rpy,
                        {name: signals[name] for name in GUARD})


def _punch(side: str, waist_yaw: float, pitch: float = -1.5) -> Dict:
    """Extend the `side` arm straight ahead in 0.18 s, hold, pull back to the guard by 0.5 s."""
    sign = SIDE_SIGN[side]
    times, guard_yaw = (0.0, 0.18, 0.25, 0.5), GUARD["waist_yaw_joint"]
    return {f"{side}_shoulder_pitch_joint": list(zip(times, (-0.6, pitch, pitch, -0.6))),
            f"{side}_shoulder_roll_joint": list(zip(times, sign * np.array((0.3, 0.08, 0.08, 0.3)))),
            f"{side}_elbow_joint": list(zip(times, (-0.6, 1.3, 1.3, -0.6))),
            "waist_yaw_joint": list(zip(times, (guard_yaw, waist_yaw, waist_yaw, guard_yaw)))}


def _uppercut(c: FightConfig) -> Dict:
    return {"z": [(0.0, c.height), (0.15, c.height - 0.04), (0.3, c.height + 0.01), (0.55, c.height)],
            "right_shoulder_pitch_joint": [(0.0, -0.6), (0.15, -0.2), (0.3, -1.7), (0.55, -0.6)],
            "right_elbow_joint": [(0.0, -0.6), (0.15, -0.1), (0.3, -0.4), (0.55, -0.6)],
            "waist_yaw_joint": [(0.0, GUARD["waist_yaw_joint"]), (0.15, 0.3), (0.3, 0.7),
                                (0.55, GUARD["waist_yaw_joint"])]}


def _weave(c: FightConfig) -> Dict:
    return {"z": [(0.0, c.height), (0.3, c.height - 0.04), (0.55, c.height - 0.04), (0.8, c.height)],
            "waist_roll_joint": [(0.0, 0.0), (0.25, 0.2), (0.55, -0.2), (0.8, 0.0)],
            "waist_pitch_joint": [(0.0, GUARD["waist_pitch_joint"]), (0.4, 0.3), (0.8, GUARD["waist_pitch_joint"])]}


_UPPER_BODY = {"jab": lambda c: _punch("left", 0.25), "cross": lambda c: _punch("right", 0.9),
               "uppercut": _uppercut, "weave": _weave}
_MOVE_S = {"jab": 0.5, "cross": 0.5, "uppercut": 0.55, "weave": 0.8, "forward": 0.6, "back": 0.6, "kick": 1.4}
"""s each move takes (then a pause in guard)."""
