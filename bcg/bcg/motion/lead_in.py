"""A reference that begins standing: the first seconds of a motion blended in from the robot at rest.

A clip cut from a long take usually opens mid-move (mid-stride, mid-punch, at 1.7 m/s), while a robot
is handed over standing still in its default pose. With a lead-in of D seconds, frame t of the
reference becomes

    x(t) = (1 - w(t)) * rest + w(t) * motion(t),    w(t) = smootherstep(t / D)  (1 from t >= D on)

for the joint angles and the root height; the root's horizontal velocity is the motion's times w(t)
(each frame's displacement scaled by w, summed from the first frame's position), and the root
orientation is slerped by w(t) from upright (facing the first frame's heading) to the motion's. At
t = 0 the reference is the rest state exactly (no velocity: w'(0) = 0); from t = D on it is the
motion with the motion's velocities (w'(D) = w''(D) = 0), its horizontal path shifted back by what
the slower start did not cover, so the blend adds no jump anywhere. Scaling the velocity rather
than blending the position keeps the start's horizontal acceleration near w' v <= 1.9 v / D (about
4 m/s^2 for a clip opening at 2 m/s with D = 1 s; blending the position would ask 10 m/s^2). The
clip keeps its length: its first D seconds are softened, nothing is prepended. Training and the
policy node apply the same blend to the same frames (`resample.at_control_rate`), so the node's
reference observations stay the training's.
"""
import dataclasses
from dataclasses import dataclass

import numpy as np

from ..rotations import heading, turned_about_vertical
from .errors import MotionFileError
from .reference import ReferenceMotion, align_quat_signs, finite_difference, quat_slerp


@dataclass(frozen=True)
class LeadIn:
    """How a reference begins from rest."""

    duration_s: float
    """s over which the motion is blended in from rest; 0: none (the motion as it is)."""
    rest_joint_pos: np.ndarray
    """(n,) rad, the rest pose's joint angles, in the joint order of the motion it is applied to."""
    standing_height: float
    """m, the root (pelvis) height of the rest pose standing on the floor."""

    def __post_init__(self):
        if not (np.isfinite(self.duration_s) and self.duration_s >= 0):
            raise MotionFileError(f"lead-in: {self.duration_s!r} s; expected a finite duration >= 0 s")


def blend_weight(times_s: np.ndarray, duration_s: float) -> np.ndarray:
    """The motion's share w (T,) at `times_s` (T,) s: smootherstep (6x^5 - 15x^4 + 10x^3) of t / D,
    0 at t = 0 and 1 from t = D on, with zero first and second derivatives at both ends."""
    x = np.clip(np.asarray(times_s, float) / duration_s, 0.0, 1.0)
    return x * x * x * (x * (6.0 * x - 15.0) + 10.0)


def led_in(motion: ReferenceMotion, lead_in: LeadIn) -> ReferenceMotion:
    """`motion` with its first `lead_in.duration_s` blended in from rest (see the module docstring);
    the joint rates are the finite differences of the blended angles. MotionFileError when the motion
    is not longer than the lead-in, or the rest pose's joint count is not the motion's."""
    if lead_in.duration_s == 0:
        return motion
    if motion.duration_s <= lead_in.duration_s:
        raise MotionFileError(f"lead-in: {lead_in.duration_s:g} s is not shorter than the motion "
                              f"({motion.duration_s:g} s)")
    rest_q = np.asarray(lead_in.rest_joint_pos, float)
    if rest_q.shape != (motion.joint_pos.shape[1],):
        raise MotionFileError(f"lead-in: rest pose of {rest_q.shape} joint angles; the motion has "
                              f"{motion.joint_pos.shape[1]} joints")
    w = blend_weight(np.arange(motion.num_frames) / motion.fps, lead_in.duration_s)[:, None]
    joint_pos = (1.0 - w) * rest_q + w * motion.joint_pos
    steps = 0.5 * (w[1:] + w[:-1]) * np.diff(motion.root_pos[:, :2], axis=0)      # each frame's displacement, scaled
    xy = motion.root_pos[0, :2] + np.concatenate([np.zeros((1, 2)), np.cumsum(steps, axis=0)])
    root_pos = np.concatenate([xy, (1.0 - w) * lead_in.standing_height + w * motion.root_pos[:, 2:]], axis=1)
    upright = turned_about_vertical(np.array([1.0, 0.0, 0.0, 0.0]), heading(motion.root_quat[0]))
    root_quat = align_quat_signs(quat_slerp(upright, motion.root_quat, w[:, 0]))
    return dataclasses.replace(motion, joint_pos=joint_pos, joint_vel=finite_difference(joint_pos, 1.0 / motion.fps),
                               root_pos=root_pos, root_quat=root_quat)
