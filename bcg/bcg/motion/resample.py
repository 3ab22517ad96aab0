"""A reference motion brought to the control rate: the frames a policy is trained on and the node
samples, computed the same way by both (training's `bcg_train.motion.build_clip` and the policy
node's `Controller`), so that the node's reference observations are the training's, lead-in
(`lead_in`) included."""
from typing import Optional, Sequence, Tuple

import numpy as np

from .lead_in import LeadIn, led_in
from .reference import ReferenceMotion, finite_difference, quat_slerp

INTERPOLATIONS = ("cubic", "linear")


def resample(motion: ReferenceMotion, rate_hz: float,
             interpolation: str = "cubic") -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Frames at times i / rate_hz within the motion -> (times (T,) s, root_pos (T, 3), root_quat
    (T, 4), joint_pos (T, n)), joints in the motion's order. 'cubic': not-a-knot cubic splines of
    the joint angles and root position; 'linear': linear interpolation. The root quaternion is
    always slerped."""
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation: one of {INTERPOLATIONS}, got {interpolation!r}")
    count = int(np.floor(motion.duration_s * rate_hz + 1e-9)) + 1
    times = np.arange(count) / rate_hz
    source = np.arange(motion.num_frames) / motion.fps
    if interpolation == "cubic":
        from scipy.interpolate import CubicSpline  # here: a policy node without a motion never loads scipy
        root_pos = CubicSpline(source, motion.root_pos, axis=0)(times)
        joint_pos = CubicSpline(source, motion.joint_pos, axis=0)(times)
    else:
        root_pos = np.stack([np.interp(times, source, c) for c in motion.root_pos.T], axis=1)
        joint_pos = np.stack([np.interp(times, source, c) for c in motion.joint_pos.T], axis=1)
    x = np.clip(times * motion.fps, 0, motion.num_frames - 1)
    i0 = np.minimum(np.floor(x).astype(int), motion.num_frames - 2)
    root_quat = quat_slerp(motion.root_quat[i0], motion.root_quat[i0 + 1], x - i0)
    return times, root_pos, root_quat, joint_pos


def at_control_rate(motion: ReferenceMotion, rate_hz: float, joint_names: Sequence[str],
                    lower: Optional[np.ndarray] = None, upper: Optional[np.ndarray] = None,
                    interpolation: str = "cubic", lead_in: Optional[LeadIn] = None) -> ReferenceMotion:
    """`motion` resampled to `rate_hz` frames/s (`resample`), only `joint_names` in that order (a
    MotionFileError names any it lacks), the angles clipped to [lower, upper] (n,) rad where given
    (an overshooting spline must not ask for more than the joint gives), blended in from rest by
    `lead_in` where given (its rest pose in `joint_names` order; `lead_in.led_in`), and the joint rates
    the finite differences of those angles at that rate."""
    columns = motion.joint_index(joint_names)
    _, root_pos, root_quat, joint_pos = resample(motion, rate_hz, interpolation)
    joint_pos = joint_pos[:, columns]
    if lower is not None or upper is not None:
        joint_pos = np.clip(joint_pos, lower, upper)
    motion = ReferenceMotion(float(rate_hz), tuple(joint_names), joint_pos,
                             finite_difference(joint_pos, 1.0 / rate_hz), root_pos, root_quat)
    return motion if lead_in is None else led_in(motion, lead_in)

