"""From a loaded ReferenceMotion (any rate, any joint order) to a MotionClip at the control rate."""
from dataclasses import dataclass
from typing import Tuple

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.spatial.transform import Rotation

from bcg.motion.reference import ReferenceMotion, finite_difference, quat_slerp

from .clip import MotionClip
from .kinematics import RobotKinematics

INTERPOLATIONS = ("cubic", "linear")


@dataclass(frozen=True)
class ResampleConfig:
    """How a motion is brought to the control rate."""

    rate_hz: float = 50.0
    """Output frames per second (the control rate: 50 Hz = dt 0.02 s)."""
    interpolation: str = "cubic"
    """Joint angles and root position between source frames: 'cubic' (not-a-knot cubic spline,
    joints then clipped to the limits) or 'linear'. The root quaternion is always slerped."""

    def __post_init__(self):
        if not self.rate_hz > 0:
            raise ValueError(f"rate_hz: must be > 0, got {self.rate_hz}")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"interpolation: one of {INTERPOLATIONS}, got {self.interpolation!r}")


def resample(motion: ReferenceMotion, rate_hz: float,
             interpolation: str = "cubic") -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Frames at times i / rate_hz within the motion -> (times (T,) s, root_pos (T, 3), root_quat
    (T, 4), joint_pos (T, n)), joints in the motion's order."""
    count = int(np.floor(motion.duration_s * rate_hz + 1e-9)) + 1
    times = np.arange(count) / rate_hz
    source = np.arange(motion.num_frames) / motion.fps
    if interpolation == "cubic":
        root_pos = CubicSpline(source, motion.root_pos, axis=0)(times)
        joint_pos = CubicSpline(source, motion.joint_pos, axis=0)(times)
    else:
        root_pos = np.stack([np.interp(times, source, c) for c in motion.root_pos.T], axis=1)
        joint_pos = np.stack([np.interp(times, source, c) for c in motion.joint_pos.T], axis=1)
    x = np.clip(times * motion.fps, 0, motion.num_frames - 1)
    i0 = np.minimum(np.floor(x).astype(int), motion.num_frames - 2)
    root_quat = quat_slerp(motion.root_quat[i0], motion.root_quat[i0 + 1], x - i0)
    return times, root_pos, root_quat, joint_pos


def angular_velocity(quat: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity (T, 3) rad/s of orientations quat (T, 4) (w x y z) spaced dt:
    rotation vector of q[i+1] q[i-1]^-1 over 2 dt inside, one-sided at the ends."""
    rot = Rotation.from_quat(quat, scalar_first=True)
    if len(quat) < 3:
        return np.tile((rot[-1] * rot[0].inv()).as_rotvec() / dt, (len(quat), 1))
    inner = (rot[2:] * rot[:-2].inv()).as_rotvec() / (2 * dt)
    first = (rot[1] * rot[0].inv()).as_rotvec() / dt
    last = (rot[-1] * rot[-2].inv()).as_rotvec() / dt
    return np.concatenate([first[None], inner, last[None]])


def build_clip(motion: ReferenceMotion, kinematics: RobotKinematics, config: ResampleConfig = ResampleConfig(),
               name: str = "") -> MotionClip:
    """Resample `motion` to `config.rate_hz`, map its joints to the robot's order by name, difference
    velocities and compute every body's frame by forward kinematics of the robot's model."""
    robot = kinematics.robot
    columns = motion.joint_index(robot.joint_names)
    _, root_pos, root_quat, joint_pos = resample(motion, config.rate_hz, config.interpolation)
    joint_pos = np.clip(joint_pos[:, columns], robot.q_lower, robot.q_upper)
    dt = 1.0 / config.rate_hz
    body_pos, body_quat = kinematics.forward(root_pos, root_quat, joint_pos)
    return MotionClip(name=name, fps=config.rate_hz, joint_names=robot.joint_names, body_names=kinematics.body_names,
                      root_pos=root_pos, root_quat=root_quat, root_lin_vel=finite_difference(root_pos, dt),
                      root_ang_vel=angular_velocity(root_quat, dt), joint_pos=joint_pos,
                      joint_vel=finite_difference(joint_pos, dt), body_pos=body_pos, body_quat=body_quat)
