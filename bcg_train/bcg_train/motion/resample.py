"""From a loaded ReferenceMotion (any rate, any joint order) to a MotionClip at the control rate."""
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from bcg.motion.lead_in import LeadIn
from bcg.motion.reference import ReferenceMotion
from bcg.motion.resample import INTERPOLATIONS, at_control_rate

from .clip import MotionClip
from .kinematics import RobotKinematics


@dataclass(frozen=True)
class ResampleConfig:
    """How a motion is brought to the control rate."""

    rate_hz: float = 50.0
    """Output frames per second (the control rate: 50 Hz = dt 0.02 s)."""
    interpolation: str = "cubic"
    """Joint angles and root position between source frames: 'cubic' (not-a-knot cubic spline,
    joints then clipped to the limits) or 'linear'. The root quaternion is always slerped."""
    lead_in_s: float = 0.0
    """s over which the clip is blended in from the robot standing at rest in its default pose
    (`bcg.motion.lead_in`); 0: the clip as it is."""

    @classmethod
    def of_policy(cls, contract) -> "ResampleConfig":
        """The clip a policy was trained on, from its `bcg.contract.PolicyContract`: at its control
        rate, with its lead-in."""
        return cls(rate_hz=1.0 / contract.control_period_s, lead_in_s=contract.motion_lead_in_s)

    def __post_init__(self):
        if not self.rate_hz > 0:
            raise ValueError(f"rate_hz: must be > 0, got {self.rate_hz}")
        if not (np.isfinite(self.lead_in_s) and self.lead_in_s >= 0):
            raise ValueError(f"lead_in_s: must be a finite duration >= 0 s, got {self.lead_in_s}")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"interpolation: one of {INTERPOLATIONS}, got {self.interpolation!r}")


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
    """Resample `motion` to `config.rate_hz`, map its joints to the robot's order by name, blend it in
    from rest over `config.lead_in_s`, difference velocities and compute every body's frame by forward
    kinematics of the robot's model."""
    robot = kinematics.robot
    lead_in = LeadIn(config.lead_in_s, robot.default_q, robot.standing_height) if config.lead_in_s else None
    m = at_control_rate(motion, config.rate_hz, robot.joint_names, robot.q_lower, robot.q_upper, config.interpolation,
                        lead_in)
    dt = 1.0 / config.rate_hz
    body_pos, body_quat = kinematics.forward(m.root_pos, m.root_quat, m.joint_pos)
    return MotionClip(name=name, fps=config.rate_hz, joint_names=robot.joint_names, body_names=kinematics.body_names,
                      root_pos=m.root_pos, root_quat=m.root_quat, root_lin_vel=m.root_lin_vel,
                      root_ang_vel=angular_velocity(m.root_quat, dt), joint_pos=m.joint_pos,
                      joint_vel=m.joint_vel, body_pos=body_pos, body_quat=body_quat)
