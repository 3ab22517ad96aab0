"""Dance: a bounce on every beat and a random sequence of four-beat figures: step-touch side to
side, arms raised in turn with a hip sway, a twist, a full turn on the spot in eight steps, and a
disco point."""
from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

from .choreography import SIDE_SIGN, Choreography, Stance, add_step, shuffled_rounds
from .profiles import Tracks

REST = {"left_shoulder_pitch_joint": 0.0, "left_shoulder_roll_joint": 0.3, "left_elbow_joint": 0.3,
        "right_shoulder_pitch_joint": 0.0, "right_shoulder_roll_joint": -0.3, "right_elbow_joint": 0.3,
        "waist_yaw_joint": 0.0, "waist_roll_joint": 0.0, "waist_pitch_joint": 0.0}
"""Joint angles (rad) between figures."""


@dataclass(frozen=True)
class DanceConfig:
    """The dance's shape; times in s, lengths in m, angles in rad."""

    duration_s: float = 15.0
    beat_s: float = 0.5
    """s per beat (120 beats/min); a figure takes 4 beats."""
    height: float = 0.73
    """m, root height between bounces."""
    bounce: float = 0.03
    """m, the root dips this much on every beat."""
    half_width: float = 0.11
    """m, lateral distance of each foot from the root."""
    side_step: float = 0.15
    """m, length of a step-touch step."""
    figures: Tuple[str, ...] = ("step_touch", "arms_up", "twist", "turn", "point")
    """Figures dealt in shuffled rounds."""


def choreography(config: DanceConfig, rng: np.random.Generator) -> Choreography:
    """One beat to start, figures dealt by `rng` while they fit, the rest at rest."""
    c = config
    tracks = Tracks({"x": 0.0, "y": 0.0, "heading": 0.0, "yaw": 0.0, "pitch": 0.0, "roll": 0.0, **REST})
    feet = {side: [Stance(-1.0, np.inf, 0.0, SIDE_SIGN[side] * c.half_width, 0.0)] for side in ("left", "right")}
    beat, t = c.beat_s, c.beat_s
    for figure in shuffled_rounds(rng, c.figures):
        if t + 4 * beat > c.duration_s - beat:
            break
        sign = float(rng.choice([-1.0, 1.0]))
        if figure == "step_touch":
            _step_touch(c, feet, tracks, t, sign)
        elif figure == "turn":
            _turn(c, feet, tracks, t, sign)
        else:
            tracks.add(t, _FIGURES[figure](c, sign))
        t += 4 * beat
    signals = {name: tracks.signal(name) for name in ("x", "y", "heading", "roll", "pitch", "yaw", *REST)}

    def root_pos(times):
        dip = c.bounce * 0.5 * (1 - np.cos(2 * np.pi * times / beat)) * np.clip(times / beat, 0.0, 1.0)
        return np.column_stack([signals["x"](times), signals["y"](times), np.full_like(times, c.height) - dip])

    def root_rpy(times):
        return np.column_stack([signals["roll"](times), signals["pitch"](times),
                                signals["heading"](times) + signals["yaw"](times)])
    return Choreography(c.duration_s, {s: tuple(v) for s, v in feet.items()}, root_pos, root_rpy,
                        {name: signals[name] for name in REST})


def _step_touch(c: DanceConfig, feet, tracks: Tracks, t: float, sign: float) -> None:
    """Out and close toward `sign` (+1 left) on beats 1-2, back on beats 3-4; the root follows the weight."""
    b = c.beat_s
    lead, trail = ("left", "right") if sign > 0 else ("right", "left")
    x0, y0 = tracks.last("x"), tracks.last("y")
    for k, (side, dy) in enumerate(((lead, sign), (trail, sign), (trail, -sign), (lead, -sign))):
        last = feet[side][-1]
        add_step(feet[side], t + k * b + 0.1 * b, t + k * b + 0.7 * b, last.x, last.y + dy * c.side_step, last.yaw)
    arm = "left" if sign > 0 else "right"
    tracks.add(t, {"y": [(0.0, y0), (b, y0 + sign * 0.6 * c.side_step), (2 * b, y0 + sign * c.side_step),
                         (3 * b, y0 + sign * 0.4 * c.side_step), (4 * b, y0)],
                   "x": [(0.0, x0), (4 * b, x0)],
                   "roll": [(0.0, 0.0), (b, -0.06 * sign), (2 * b, 0.0), (3 * b, 0.06 * sign), (4 * b, 0.0)],
                   f"{arm}_shoulder_roll_joint": [(0.0, REST[f"{arm}_shoulder_roll_joint"]), (b, 1.2 * sign),
                                                  (2 * b, 0.5 * sign), (3 * b, 1.2 * sign),
                                                  (4 * b, REST[f"{arm}_shoulder_roll_joint"])]})


def _turn(c: DanceConfig, feet, tracks: Tracks, t: float, sign: float) -> None:
    """A full turn toward `sign` (+1 counter-clockwise) in eight steps of a quarter turn per foot."""
    b = c.beat_s
    x0, y0 = tracks.last("x"), tracks.last("y")
    yaw0 = tracks.last("heading")
    yaw_keys = [(0.0, yaw0)]
    for k in range(8):
        side = ("left", "right")[k % 2] if sign > 0 else ("right", "left")[k % 2]
        yaw = yaw0 + sign * np.pi / 2 * (k // 2 + 1)
        offset = SIDE_SIGN[side] * c.half_width
        add_step(feet[side], t + k * b / 2, t + (k + 0.8) * b / 2, x0 - offset * np.sin(yaw),
                 y0 + offset * np.cos(yaw), yaw, clearance=0.04)
        yaw_keys.append(((k + 1) * b / 2, yaw0 + sign * np.pi / 4 * (k + 1)))
    tracks.add(t, {"heading": yaw_keys,
                   "waist_yaw_joint": [(0.0, 0.0), (b, 0.2 * sign), (3 * b, 0.2 * sign), (4 * b, 0.0)]})


def _arms_up(c: DanceConfig, sign: float) -> Dict:
    """Raise one arm overhead for two beats, then the other, swaying the hips under it."""
    b = c.beat_s
    first, second = ("left", "right") if sign > 0 else ("right", "left")
    keys: Dict = {"roll": [(0.0, 0.0), (b, 0.06 * sign), (2 * b, 0.0), (3 * b, -0.06 * sign), (4 * b, 0.0)],
                  "y": [(0.0, 0.0), (b, -0.03 * sign), (2 * b, 0.0), (3 * b, 0.03 * sign), (4 * b, 0.0)],
                  "waist_roll_joint": [(0.0, 0.0), (b, -0.12 * sign), (2 * b, 0.0), (3 * b, 0.12 * sign), (4 * b, 0.0)]}
    for arm, start in ((first, 0.0), (second, 2 * b)):
        keys[f"{arm}_shoulder_pitch_joint"] = [(start, 0.0), (start + 0.8 * b, -2.5), (start + 1.4 * b, -2.5),
                                               (start + 2 * b, 0.0)]
        keys[f"{arm}_elbow_joint"] = [(start, 0.3), (start + 0.8 * b, 1.2), (start + 1.4 * b, 1.2),
                                      (start + 2 * b, 0.3)]
    return keys


def _twist(c: DanceConfig, sign: float) -> Dict:
    """Hips twist one way and the chest the other, once per beat, elbows bent."""
    b = c.beat_s
    twist = [(k * b, 0.0 if k in (0, 4) else sign * (-1) ** k * 0.3) for k in range(5)]
    keys = {"yaw": twist, "waist_yaw_joint": [(dt, -1.6 * v) for dt, v in twist]}
    for arm in ("left", "right"):
        keys[f"{arm}_elbow_joint"] = [(0.0, 0.3), (0.5 * b, -0.3), (3.5 * b, -0.3), (4 * b, 0.3)]
        keys[f"{arm}_shoulder_pitch_joint"] = [(dt, -0.3 + SIDE_SIGN[arm] * v) for dt, v in twist]
    return keys


def _point(c: DanceConfig, sign: float) -> Dict:
    """Disco: one arm points up and out on beats 1 and 3, across and down on 2 and 4; the other on the hip."""
    b = c.beat_s
    arm, other = ("right", "left") if sign > 0 else ("left", "right")
    s = SIDE_SIGN[arm]
    poses = [(-2.4, 0.6 * s) if k % 2 == 0 else (-0.5, -0.1 * s) for k in range(4)]   # (pitch, roll): up, down
    times = [0.0] + [(k + 0.6) * b for k in range(4)] + [4 * b]
    rest_roll = REST[f"{arm}_shoulder_roll_joint"]
    pitch = list(zip(times, [0.0] + [p for p, _ in poses] + [0.0]))
    roll = list(zip(times, [rest_roll] + [r for _, r in poses] + [rest_roll]))
    return {f"{arm}_shoulder_pitch_joint": pitch, f"{arm}_shoulder_roll_joint": roll,
            f"{arm}_elbow_joint": [(0.0, 0.3), (0.6 * b, 1.3), (3.6 * b, 1.3), (4 * b, 0.3)],
            f"{other}_shoulder_roll_joint": [(0.0, REST[f"{other}_shoulder_roll_joint"]), (0.5 * b, 0.6 * -s),
                                             (3.5 * b, 0.6 * -s), (4 * b, REST[f"{other}_shoulder_roll_joint"])],
            f"{other}_elbow_joint": [(0.0, 0.3), (0.5 * b, -0.6), (3.5 * b, -0.6), (4 * b, 0.3)],
            "roll": [(k * b, 0.0 if k in (0, 4) else 0.05 * (-1) ** k * s) for k in range(5)],
            "waist_yaw_joint": [(0.0, 0.0), (b, 0.25 * s), (3 * b, 0.25 * s), (4 * b, 0.0)]}


_FIGURES = {"arms_up": _arms_up, "twist": _twist, "point": _point}
