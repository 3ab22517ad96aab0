"""Plausibility checks of a motion clip: planted feet on the floor, joint limits, continuity,
ballistic flight, self-collision. Used on the built-in synthetic clips (tests and
`python -m bcg_train.motion check`); works on any MotionClip given when its feet are planted."""
from dataclasses import asdict, dataclass
from typing import Dict, List

import mujoco
import numpy as np

from .clip import MotionClip
from .kinematics import RobotKinematics
from .resample import ResampleConfig, build_clip
from .synthetic import synthesize_builtin
from .synthetic.profiles import GRAVITY


@dataclass(frozen=True)
class CheckLimits:
    """Pass thresholds of `MotionReport.failures`."""

    stance_height_m: float = 0.002
    """Largest |height| of a planted foot's contact-sphere bottoms above z = 0."""
    swing_height_m: float = -0.001
    """Lowest a swinging foot's sphere bottom may go (negative: below the floor)."""
    limit_margin_rad: float = 0.02
    """Smallest distance of any joint angle to its limits."""
    joint_speed: float = 20.0
    """rad/s, largest change of a joint angle between consecutive frames times the frame rate
    (continuity: a jump in q shows as a huge speed)."""
    flight_accel_error: float = 0.5
    """m/s^2, largest |root vertical acceleration + g| while both feet are off the ground."""
    penetration_m: float = 0.01
    """Deepest allowed overlap between two of the robot's own collision geoms."""


@dataclass(frozen=True)
class MotionReport:
    """What `check_clip` measured (lengths m, angles rad, times s)."""

    name: str
    frames: int
    fps: float
    stance_height_error_m: float
    """Max |bottom height| of the contact spheres of planted feet."""
    swing_min_height_m: float
    """Lowest contact-sphere bottom of a foot in swing."""
    limit_margin_rad: float
    limit_margin_joint: str
    max_joint_step_rad: float
    """Largest change of a joint angle between consecutive frames."""
    max_joint_step_joint: str
    max_root_speed: float
    """m/s, horizontal."""
    root_apex_m: float
    """Highest root position above its height in the first frame."""
    flight_frames: int
    """Frames with both feet off the ground."""
    flight_accel_error: float
    """m/s^2, max |root z'' + g| in flight (second differences, frames whose neighbours fly too)."""
    self_penetration_m: float
    """Deepest overlap between two robot geoms (MuJoCo collision of the model's own geoms)."""
    self_penetration_pair: str

    def failures(self, limits: CheckLimits = CheckLimits()) -> List[str]:
        """Each threshold of `limits` this motion misses, as a sentence; empty when it passes."""
        out = []
        if self.stance_height_error_m > limits.stance_height_m:
            out.append(f"planted foot off the floor by {self.stance_height_error_m * 1e3:.2f} mm")
        if self.swing_min_height_m < limits.swing_height_m:
            out.append(f"swinging foot {-self.swing_min_height_m * 1e3:.2f} mm into the floor")
        if self.limit_margin_rad < limits.limit_margin_rad:
            out.append(f"{self.limit_margin_joint} within {self.limit_margin_rad:.3f} rad of its limit")
        if self.max_joint_step_rad * self.fps > limits.joint_speed:
            out.append(f"a joint moves {self.max_joint_step_rad:.3f} rad in one frame "
                       f"({self.max_joint_step_rad * self.fps:.1f} rad/s)")
        if self.flight_accel_error > limits.flight_accel_error:
            out.append(f"flight not ballistic: |z'' + g| up to {self.flight_accel_error:.2f} m/s^2")
        if self.self_penetration_m > limits.penetration_m:
            out.append(f"self-collision {self.self_penetration_m * 1e3:.1f} mm ({self.self_penetration_pair})")
        return out

    def as_dict(self) -> Dict:
        return asdict(self)


def check_clip(clip: MotionClip, kinematics: RobotKinematics, planted: Dict[str, np.ndarray]) -> MotionReport:
    """Measure `clip` (robot joint order) given planted (side -> (T,) bool, foot planted per frame)."""
    robot = kinematics.robot
    heights = kinematics.foot_sphere_heights(clip.root_pos, clip.root_quat, clip.joint_pos)
    stance = max((np.abs(h[planted[s]]).max(initial=0.0) for s, h in heights.items()), default=0.0)
    swing = min((h[~planted[s]].min(initial=np.inf) for s, h in heights.items()), default=np.inf)
    margin = np.minimum(clip.joint_pos - robot.q_lower, robot.q_upper - clip.joint_pos).min(axis=0)
    flying = ~np.any(list(planted.values()), axis=0)
    inner = flying.copy()
    inner[[0, -1]] = False
    inner[1:-1] &= flying[:-2] & flying[2:]
    dt = 1.0 / clip.fps
    z_accel = np.zeros(clip.num_frames)
    z_accel[1:-1] = (clip.root_pos[2:, 2] - 2 * clip.root_pos[1:-1, 2] + clip.root_pos[:-2, 2]) / dt ** 2
    steps = np.abs(np.diff(clip.joint_pos, axis=0))
    depth, pair = _self_penetration(kinematics, clip)
    return MotionReport(
        name=clip.name, frames=clip.num_frames, fps=clip.fps, stance_height_error_m=float(stance),
        swing_min_height_m=float(swing), limit_margin_rad=float(margin.min()),
        limit_margin_joint=robot.joint_names[int(np.argmin(margin))],
        max_joint_step_rad=float(steps.max()),
        max_joint_step_joint=robot.joint_names[int(np.argmax(steps.max(axis=0)))],
        max_root_speed=float(np.linalg.norm(clip.root_lin_vel[:, :2], axis=1).max()),
        root_apex_m=float(clip.root_pos[:, 2].max() - clip.root_pos[0, 2]), flight_frames=int(flying.sum()),
        flight_accel_error=float(np.abs(z_accel[inner] + GRAVITY).max(initial=0.0)),
        self_penetration_m=depth, self_penetration_pair=pair)


def _self_penetration(kinematics: RobotKinematics, clip: MotionClip):
    """(deepest overlap m, 'body - body') between the robot's own geoms over the clip's frames."""
    m, d = kinematics.model, kinematics.data
    robot_body = np.zeros(m.nbody, bool)
    robot_body[kinematics.body_ids] = True
    deepest, pair = 0.0, ""
    for i in range(clip.num_frames):
        kinematics.set_pose(clip.root_pos[i], clip.root_quat[i], clip.joint_pos[i])
        mujoco.mj_collision(m, d)
        b1, b2 = m.geom_bodyid[d.contact.geom1], m.geom_bodyid[d.contact.geom2]
        own = robot_body[b1] & robot_body[b2]
        if np.any(own) and -d.contact.dist[own].min() > deepest:
            k = np.flatnonzero(own)[np.argmin(d.contact.dist[own])]
            deepest, pair = float(-d.contact.dist[k]), f"{m.body(b1[k]).name} - {m.body(b2[k]).name}"
    return deepest, pair


def check_builtin(name: str, kinematics: RobotKinematics, config: ResampleConfig = ResampleConfig()) -> MotionReport:
    """Synthesise the built-in motion `name` at the control rate, build its clip and check it."""
    synthetic = synthesize_builtin(name, kinematics, fps=config.rate_hz)
    clip = build_clip(synthetic.motion, kinematics, config, name=name)
    times = np.arange(clip.num_frames) / clip.fps
    return check_clip(clip, kinematics, {side: synthetic.choreography.planted(side, times)
                                         for side in kinematics.foot_bodies})
