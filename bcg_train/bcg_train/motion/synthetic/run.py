"""Run: stand, speed up step by step, run with a flight phase between steps, slow down, stand.

Planned step by step: the root's horizontal speed changes only while a foot is planted (min-jerk
from one step's speed to the next) and is constant in flight; its height is a parabola under
gravity in flight. A stance lasts at most `stance_length / speed`, so steps get a flight phase once
the run is fast enough.
"""
from dataclasses import dataclass

import numpy as np

from .choreography import SIDE_SIGN, Choreography, Stance
from .profiles import GRAVITY, hermite_path, keyframes, min_jerk


@dataclass(frozen=True)
class RunConfig:
    """The run's shape; times in s, lengths in m, angles in rad."""

    duration_s: float = 15.0
    speed: float = 2.2
    """m/s, cruising speed of the root."""
    cadence: float = 3.0
    """steps/s."""
    stance_length: float = 0.45
    """m, longest distance the root travels while one foot is planted."""
    stand_s: float = 1.0
    """s standing still at the start and at the end."""
    ramp_s: float = 2.5
    """s to reach cruising speed and to stop from it."""
    stand_height: float = 0.75
    """m, root height standing."""
    run_height: float = 0.72
    """m, root height at take-off and touch-down at cruising speed."""
    half_width: float = 0.1
    """m, lateral distance of each foot from the line of running."""
    clearance: float = 0.12
    """m, swing-foot lift at cruising speed."""
    lean: float = 0.12
    """rad, forward pitch of the root at cruising speed."""
    pelvis_yaw: float = 0.08
    """rad, pelvis rotation with the legs at cruising speed (the torso counter-rotates)."""
    arm_swing: float = 0.55
    """rad, shoulder-pitch swing amplitude at cruising speed."""


def choreography(config: RunConfig, rng: np.random.Generator) -> Choreography:
    """The run (deterministic: `rng` is unused)."""
    c = config
    period = 1.0 / c.cadence
    steps = int(np.floor((c.duration_s - 2 * c.stand_s) / period + 1e-9))
    if steps < 2:                                              # a step of each foot between the two stands
        raise ValueError(f"duration_s: {c.duration_s} s is too short for a run: at least two steps between "
                         f"two stands of {c.stand_s:g} s ({2 * c.stand_s + 2 * period:.2f} s)")
    touchdown = c.stand_s + np.arange(steps + 1) * period      # step k's foot lands at touchdown[k]; 0: start
    ramp_steps = c.ramp_s * c.cadence
    k = np.arange(steps + 1)
    fraction = min_jerk(k / ramp_steps) * min_jerk((steps - 1 - k) / ramp_steps)   # speed during step k
    speed = c.speed * fraction
    mean_speed = 0.5 * (speed[:-1] + speed[1:])
    stance_s = np.minimum(period, c.stance_length / np.maximum(mean_speed, 1e-9))
    lift_off = touchdown[:-1] + stance_s                       # stance k: [touchdown[k], lift_off[k]]
    x_td = np.zeros(steps + 1)                                 # root x at each touchdown
    x_lo = np.zeros(steps)
    for i in range(steps):
        x_lo[i] = x_td[i] + mean_speed[i] * stance_s[i]
        x_td[i + 1] = x_lo[i] + speed[i + 1] * (period - stance_s[i])
    height = c.stand_height + (c.run_height - c.stand_height) * fraction

    x_knots = [(0.0, 0.0, 0.0)]
    z_knots = [(0.0, c.stand_height, 0.0), (touchdown[0], c.stand_height, 0.0)]
    for i in range(steps):
        x_knots.append((touchdown[i], x_td[i], speed[i]))
        flight = touchdown[i + 1] - lift_off[i]
        if flight > 1e-9:
            vz = 0.5 * GRAVITY * flight
            x_knots.append((lift_off[i], x_lo[i], speed[i + 1]))
            z_knots += [(lift_off[i], height[i + 1], vz), (touchdown[i + 1], height[i + 1], -vz)]
        else:
            z_knots.append((touchdown[i + 1], height[i + 1], 0.0))
    x_knots.append((touchdown[-1], x_td[-1], 0.0))
    x_path, z_path = hermite_path(x_knots), hermite_path(z_knots)

    def root_pos(t):
        return np.column_stack([x_path(t), np.zeros_like(t), z_path(t)])

    first_lift = {"left": touchdown[0], "right": lift_off[0]}                # the left foot steps first
    stances = {side: [Stance(-1.0, first_lift[side], 0.0, SIDE_SIGN[side] * c.half_width, 0.0)]
               for side in ("left", "right")}
    for i in range(1, steps + 1):            # step i: the left foot lands on odd steps
        side = "left" if i % 2 else "right"
        last = i >= steps - 1
        t_off = np.inf if last else lift_off[i]
        x = x_td[i] if last else 0.5 * (x_td[i] + x_lo[i])
        lift = c.clearance * max(fraction[i - 1], 0.3)
        stances[side].append(Stance(touchdown[i], t_off, float(x), SIDE_SIGN[side] * c.half_width, 0.0,
                                    clearance=lift, follow_root=True))

    pace = keyframes(touchdown, fraction)
    phase = keyframes(touchdown, k.astype(float))                # steps taken, continuous

    def swing(t):
        """+1 when the left leg is forward (right foot planted), -1 the other way, scaled by speed."""
        return pace(t) * np.sin(np.pi * phase(t))

    def root_rpy(t):
        return np.column_stack([np.zeros_like(t), c.lean * pace(t), -c.pelvis_yaw * swing(t)])

    joints = {"waist_yaw_joint": lambda t: 1.5 * c.pelvis_yaw * swing(t)}
    for side, sign in SIDE_SIGN.items():
        joints[f"{side}_shoulder_pitch_joint"] = lambda t, s=sign: 0.2 + s * c.arm_swing * swing(t)
        joints[f"{side}_shoulder_roll_joint"] = lambda t, s=sign: s * (0.2 + 0.05 * pace(t))
        joints[f"{side}_elbow_joint"] = lambda t: 0.6 - 0.7 * pace(t)
    return Choreography(c.duration_s, {s: tuple(v) for s, v in stances.items()}, root_pos, root_rpy, joints)

