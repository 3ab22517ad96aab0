"""Plausibility checks of motions, run by `python -m bcg_train.motion check`.

- `check_clip` / `check_builtin`: planted feet on the floor, joint limits, continuity, ballistic
  flight, self-collision, for a MotionClip whose planted feet are known (the built-in synthetic clips).
- `check_file_motion`: a motion read from a file (real motion capture) at its own frame rate:
  velocity spikes from retargeting, joint-limit violations, flight phases (both feet off the floor
  by forward kinematics), root speed and height, and what gravity says about the file. Gravity is
  the clock a file cannot set: nothing pulls the body down faster than g, so a root that falls much
  faster was read at too high a frame rate (a 30 fps file read at 60 moves twice as fast, its
  accelerations four times); an airborne body falls at g, so flights whose root barely curves down,
  or that last longer than any jump (a ballistic flight of t seconds rises g t^2 / 8), were read at
  too low a rate (a 60 fps file read at 30) or float above the floor (a retargeting artefact); and
  the pelvis stands upright, so a root tilted far from vertical most of the time is a root
  quaternion read in the wrong order. A motion with no flight read at too low a rate is slow but
  plausible motion, which no check can tell.
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
    max_flight_s: float = 0.7
    """Longest flight phase of a jump: a ballistic flight of 0.7 s rises g t^2 / 8 = 0.6 m, more than
    a standing jump lifts a person's body; a longer one is a float or a wrong frame rate (a failure)."""
    max_root_speed: float = 10.0
    """m/s, fastest horizontal root speed (a sprinter's); faster is a wrong frame rate (a failure)."""
    max_fall_accel: float = 1.5 * GRAVITY
    """m/s^2, the largest downward root acceleration allowed in more than `fall_fraction` of the frames:
    only gravity pulls a body down (the pelvis moves a little against the body's centre of mass, and
    capture noise adds some); recorded motion stays under 0.85 g, the same read at twice its frame
    rate reaches 2-2.5 g (a failure)."""
    fall_fraction: float = 0.01
    """Share of the frames whose downward acceleration may exceed `max_fall_accel`."""
    min_flight_accel: float = GRAVITY / 3
    """m/s^2, the smallest mean downward root acceleration over the frames of flight phases: the
    pelvis of recorded jumps and runs curves down at 0.35-0.55 g while both feet are off the floor
    (it moves against the centre of mass, which falls at g, and the feet's 2 cm clearance leaves out
    the flight's ends); read at half its frame rate a motion curves at a quarter of that (a failure)."""
    min_flight_frames: int = 10
    """Fewest frames in flight (with both neighbours in flight) for `min_flight_accel` to be judged."""
    max_root_tilt_deg: float = 60.0
    """Largest angle of the pelvis's up axis from vertical counted as upright."""
    max_tilted_fraction: float = 0.1
    """Share of the frames the pelvis may be tilted beyond `max_root_tilt_deg` (recorded motion: under
    2 %; a quaternion read in the wrong order: a third or more) before it is a failure."""


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
    longest_flight_start_s: float
    mean_root_speed: float
    """m/s, horizontal, mean over the frames."""
    max_root_speed: float
    root_height_min_m: float
    foot_height_min_m: float
    """Lowest contact-sphere bottom of either foot (negative: into the floor)."""
    root_fall_accel: float
    """m/s^2, the downward root acceleration that `fall_fraction` of the frames exceed (second
    differences over about 1/15 s, whatever the frame rate, so that capture noise does not grow with it)."""
    flight_accel: float
    """m/s^2, mean downward root acceleration over the flight frames whose neighbours fly too (NaN
    when fewer than `min_flight_frames`)."""
    flight_frames: int
    """Frames counted in `flight_accel`."""
    tilted_fraction: float
    """Share of the frames whose pelvis up axis is more than `max_root_tilt_deg` from vertical."""
    max_root_tilt_deg: float
    limits: FileCheckLimits = FileCheckLimits()
    """The thresholds of `failures`."""

    def failures(self) -> List[str]:
        """Each problem as a sentence naming it; empty when the motion passes: frame rate (root speed,
        fall faster than gravity, flights not ballistic), flights longer than a jump, a tilted root
        (quaternion order), velocity spikes, joint-limit violations."""
        out, lim = [], self.limits
        if self.max_root_speed > lim.max_root_speed:
            out.append(f"frame rate: the root moves at up to {self.max_root_speed:.1f} m/s, faster than a sprint "
                       f"({lim.max_root_speed:g} m/s): is {self.fps:g} fps the file's frame rate?")
        if self.root_fall_accel > lim.max_fall_accel:
            out.append(f"frame rate: the root falls faster than gravity, {self.root_fall_accel:.1f} m/s^2 "
                       f"({self.root_fall_accel / GRAVITY:.1f} g) in {lim.fall_fraction:.0%} of the frames (at most "
                       f"{lim.max_fall_accel / GRAVITY:.2g} g): {self.fps:g} fps is too high for this file "
                       "(e.g. a 30 fps file read at 60: fps=HZ)")
        if self.flight_frames >= lim.min_flight_frames and self.flight_accel < lim.min_flight_accel:
            out.append(f"frame rate: flights not ballistic, the root curves down at {self.flight_accel:.1f} m/s^2 "
                       f"while both feet are off the floor ({self.flight_frames} frames; recorded jumps at least "
                       f"{lim.min_flight_accel:.1f}, gravity {GRAVITY:g}): {self.fps:g} fps is too low for this file "
                       "(e.g. a 60 fps file read at 30: fps=HZ)")
        if self.longest_flight_s > lim.max_flight_s:
            rise = GRAVITY * self.longest_flight_s ** 2 / 8
            out.append(f"flight longer than a jump: both feet off the floor for {self.longest_flight_s:.2f} s from "
                       f"{self.longest_flight_start_s:.2f} s (at most {lim.max_flight_s:g} s; a ballistic flight "
                       f"that long would rise g t^2/8 = {rise:.2f} m): the motion floats above the floor "
                       "(retargeting) or its frame rate is too low")
        if self.tilted_fraction > lim.max_tilted_fraction:
            out.append(f"root orientation: the pelvis is more than {lim.max_root_tilt_deg:g} deg from upright in "
                       f"{self.tilted_fraction:.0%} of the frames (up to {self.max_root_tilt_deg:.0f} deg): is the "
                       "root quaternion in the file's order (CSV columns 4-7: x y z w; npz: w x y z)?")
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
    flights = [(start, stop) for start, stop in _runs(lowest > limits.flight_clearance_m)
               if stop - start >= limits.min_flight_s * motion.fps - 1e-9]
    root_speed = np.linalg.norm(np.gradient(motion.root_pos[:, :2], 1.0 / motion.fps, axis=0), axis=1)
    longest = max(flights, key=lambda run: run[1] - run[0], default=(0, 0))
    flight_accel, flight_frames = _flight_accel(motion, lowest > limits.flight_clearance_m)
    tilt = _root_tilt_deg(motion.root_quat)
    return FileMotionReport(
        name=name, frames=motion.num_frames, fps=motion.fps, duration_s=motion.duration_s,
        max_joint_speed=float(speed.max()), max_joint_speed_joint=robot.joint_names[int(np.argmax(speed.max(axis=0)))],
        spike_speed=limits.spike_speed, spikes=find_spikes(q, motion.fps, robot.joint_names, limits.spike_speed),
        limit_violations=int(np.sum(excess > limits.limit_tolerance)), worst_limit_excess_rad=float(excess.max()),
        worst_limit_joint=robot.joint_names[int(np.argmax(excess.max(axis=0)))], flight_phases=len(flights),
        longest_flight_s=(longest[1] - longest[0]) / motion.fps, longest_flight_start_s=longest[0] / motion.fps,
        mean_root_speed=float(root_speed.mean()), max_root_speed=float(root_speed.max()),
        root_height_min_m=float(motion.root_pos[:, 2].min()), foot_height_min_m=float(lowest.min()),
        root_fall_accel=_fall_accel(motion, limits.fall_fraction), flight_accel=flight_accel,
        flight_frames=flight_frames, tilted_fraction=float(np.mean(tilt > limits.max_root_tilt_deg)),
        max_root_tilt_deg=float(tilt.max()), limits=limits)


FALL_ACCEL_SPAN_S = 1.0 / 15
"""s, the step of the second differences that measure the root's vertical acceleration."""


def _fall_accel(motion: ReferenceMotion, fraction: float) -> float:
    """m/s^2, the downward root acceleration exceeded in `fraction` of the frames (0 when it never
    points down): second differences of the root height over k frames, k = the frame rate times
    `FALL_ACCEL_SPAN_S` (at least 1)."""
    k = max(1, int(round(motion.fps * FALL_ACCEL_SPAN_S)))
    z = motion.root_pos[:, 2]
    if len(z) <= 2 * k:
        return 0.0
    accel = (z[2 * k:] - 2 * z[k:-k] + z[:-2 * k]) * (motion.fps / k) ** 2
    return float(max(0.0, -np.quantile(accel, fraction)))


def _flight_accel(motion: ReferenceMotion, airborne: np.ndarray) -> Tuple[float, int]:
    """(mean downward root acceleration m/s^2 over the frames airborne with both neighbours airborne,
    their number); NaN without such frames. airborne: (T,) bool."""
    inner = airborne.copy()
    inner[[0, -1]] = False
    inner[1:-1] &= airborne[:-2] & airborne[2:]
    if not inner.any():
        return float("nan"), 0
    z = motion.root_pos[:, 2]
    accel = (z[2:] - 2 * z[1:-1] + z[:-2]) * motion.fps ** 2
    return float(-accel[inner[1:-1]].mean()), int(inner.sum())


def _root_tilt_deg(quat: np.ndarray) -> np.ndarray:
    """(T,) degrees between the up axis of the root orientations quat (T, 4) (w x y z) and vertical."""
    cos_tilt = 1.0 - 2.0 * (quat[:, 1] ** 2 + quat[:, 2] ** 2)
    return np.degrees(np.arccos(np.clip(cos_tilt, -1.0, 1.0)))


def _runs(mask: np.ndarray) -> List[Tuple[int, int]]:
    """(start, stop) of each stretch of True in mask (T,) bool, stop exclusive."""
    edges = np.diff(np.concatenate([[0], np.asarray(mask, int), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))
