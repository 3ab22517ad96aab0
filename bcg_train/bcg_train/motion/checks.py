"""Plausibility checks of motions, run by `python -m bcg_train.motion check`.

- `check_clip` / `check_builtin`: planted feet on the floor, joint limits, continuity, ballistic
  flight, self-collision, for a MotionClip whose planted feet are known (the built-in synthetic clips).
- `check_file_motion`: a motion read from a file (real motion capture) at its own frame rate:
  velocity spikes from retargeting, joint-limit violations, flight phases (both feet off the floor
  by forward kinematics), root speed and height.
"""
from dataclasses import asdict, dataclass
from typing import Dict, List, Tuple

import mujoco
import numpy as np

from bcg.motion import JointLimits, ReferenceMotion
from bcg.motion.spikes import SPIKE_SPEED, Spike, find_spikes

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


@dataclass(frozen=True)
class FileCheckLimits:
    """Thresholds of `check_file_motion` (a motion read from a file: no choreography says which
    foot is planted, so feet are judged by their height)."""

    spike_speed: float = SPIKE_SPEED
    """rad/s: a joint moving faster than this between two frames is a velocity spike (a failure)."""
    limit_tolerance: float = 1e-6
    """rad an angle may exceed a joint limit before it counts as a violation (a failure)."""
    flight_clearance_m: float = 0.02
    """Height of both feet's lowest contact-sphere bottoms above z = 0 that counts as airborne."""
    min_flight_s: float = 0.1
    """Shortest airborne stretch counted as a flight phase."""


@dataclass(frozen=True)
class FileMotionReport:
    """What `check_file_motion` measured on the file's own frames (lengths m, angles rad, times s)."""

    name: str
    frames: int
    fps: float
    duration_s: float
    max_joint_speed: float
    """rad/s, largest |q[k+1] - q[k]| * fps."""
    max_joint_speed_joint: str
    spike_speed: float
    """rad/s, the threshold `spikes` counts against."""
    spikes: List[Spike]
    limit_violations: int
    """(frame, joint) samples beyond a joint limit by more than the tolerance."""
    worst_limit_excess_rad: float
    """Largest excess over a limit (negative: the smallest margin to one)."""
    worst_limit_joint: str
    flight_phases: int
    """Stretches of at least `min_flight_s` with both feet above `flight_clearance_m`."""
    longest_flight_s: float
    mean_root_speed: float
    """m/s, horizontal, mean over the frames."""
    max_root_speed: float
    root_height_min_m: float
    foot_height_min_m: float
    """Lowest contact-sphere bottom of either foot (negative: into the floor)."""

    def failures(self) -> List[str]:
        """Velocity spikes and joint-limit violations, as sentences; empty when the motion passes."""
        out = []
        if self.spikes:
            worst = max(self.spikes, key=lambda s: abs(s.speed))
            out.append(f"{len(self.spikes)} velocity spike(s) above {self.spike_speed:g} rad/s, worst {worst.joint} "
                       f"{worst.speed:+.1f} rad/s at {worst.frame / self.fps:.2f} s "
                       f"(repair: load as FILE,despike={self.spike_speed:g})")
        if self.limit_violations:
            out.append(f"{self.limit_violations} joint sample(s) beyond the limits, worst {self.worst_limit_joint} "
                       f"by {self.worst_limit_excess_rad:.4f} rad")
        return out


def check_file_motion(name: str, motion: ReferenceMotion, kinematics: RobotKinematics,
                      limits: FileCheckLimits = FileCheckLimits()) -> FileMotionReport:
    """Measure `motion` (any joint order holding all the robot's joints) at its own frame rate:
    joint speeds and spikes, joint limits, flight phases from the feet's forward kinematics, root speed."""
    robot = kinematics.robot
    q = motion.joint_pos[:, motion.joint_index(robot.joint_names)]
    speed = np.abs(np.diff(q, axis=0)) * motion.fps
    excess = JointLimits.of(robot).excess(robot.joint_names, q)
    heights = kinematics.foot_sphere_heights(motion.root_pos, motion.root_quat, q)
    lowest = np.min([h.min(axis=1) for h in heights.values()], axis=0)
    flights = [stop - start for start, stop in _runs(lowest > limits.flight_clearance_m)
               if stop - start >= limits.min_flight_s * motion.fps - 1e-9]
    root_speed = np.linalg.norm(np.gradient(motion.root_pos[:, :2], 1.0 / motion.fps, axis=0), axis=1)
    return FileMotionReport(
        name=name, frames=motion.num_frames, fps=motion.fps, duration_s=motion.duration_s,
        max_joint_speed=float(speed.max()), max_joint_speed_joint=robot.joint_names[int(np.argmax(speed.max(axis=0)))],
        spike_speed=limits.spike_speed, spikes=find_spikes(q, motion.fps, robot.joint_names, limits.spike_speed),
        limit_violations=int(np.sum(excess > limits.limit_tolerance)), worst_limit_excess_rad=float(excess.max()),
        worst_limit_joint=robot.joint_names[int(np.argmax(excess.max(axis=0)))], flight_phases=len(flights),
        longest_flight_s=max(flights, default=0) / motion.fps, mean_root_speed=float(root_speed.mean()),
        max_root_speed=float(root_speed.max()), root_height_min_m=float(motion.root_pos[:, 2].min()),
        foot_height_min_m=float(lowest.min()))


def _runs(mask: np.ndarray) -> List[Tuple[int, int]]:
    """(start, stop) of each stretch of True in mask (T,) bool, stop exclusive."""
    edges = np.diff(np.concatenate([[0], np.asarray(mask, int), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))
