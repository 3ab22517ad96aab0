"""Reference-motion files: the one loader of the suite (policy node, MuJoCo bridge and training).

Formats, chosen by the file suffix:
- `.csv`, Unitree's retargeted LAFAN1 for the G1: no header, one frame per line, 36 columns: root
  x y z (m, world), root quaternion x y z w, then the 29 joint angles (rad) in SDK order
  (`bcg.robot.SDK_JOINT_NAMES`). 30 frames/s unless the `fps` option says otherwise (the format
  cannot say). `save_motion_csv` writes it.
- `.npz`, BeyondMimic (HybridRobotics/whole_body_tracking, `scripts/csv_to_npz.py`) and mjlab: `fps`
  (scalar or (1,)), `joint_pos` and `joint_vel` (T, 29) rad, rad/s, `body_pos_w` (T, B, 3) m and
  `body_quat_w` (T, B, 4) (w x y z) of every body, body 0 being the articulation root (pelvis);
  `body_lin_vel_w` / `body_ang_vel_w` are not read. The joint columns are named by a `joint_names`
  array when the file has one, else by the `joint_order` option: `isaaclab` (the default,
  BeyondMimic's order, `ISAACLAB_G1_JOINT_NAMES`) or `sdk` (mjlab's, the model's order).
- `.npz`, this suite's own: `fps`, `joint_pos` (T, n), `joint_names` (n,) (or the `joint_order`
  option), `root_pos` (T, 3), `root_quat` (T, 4) (w x y z), optional `joint_vel` (T, n).
Joints are always mapped by name.

`load_motion` takes a path, a `MotionSource` or its string form `PATH[@START:END][,option=value...]`
(`bcg.motion.source`: crop by time, CSV frame rate, npz joint order, velocity-spike repair).

Every problem raises `MotionFileError` naming the file, the line (CSV, 1-based) or frame (npz,
0-based), the column and what is wrong: wrong column count, non-numbers, NaN/Inf, non-unit root
quaternions, too few frames, a time window outside the file, unknown or duplicate joint names,
joint-limit violations (or, with `clip_to_limits`, a `JointLimitWarning` and clipped angles).
"""
import warnings
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from bcg.atomic_file import write_atomic
from bcg.robot.sdk_joints import SDK_JOINT_NAMES

from .errors import JointLimitWarning, MotionFileError
from .reference import ReferenceMotion, align_quat_signs
from .source import FPS_RANGE, MotionSource
from .spikes import remove_spikes

LAFAN1_FPS = 30.0
"""Frame rate of Unitree's retargeted LAFAN1 CSV files (the format has no header to say so)."""

LAFAN1_ROOT_COLUMNS = ("root_x", "root_y", "root_z", "root_qx", "root_qy", "root_qz", "root_qw")
"""The first 7 of the 36 LAFAN1 CSV columns; the 29 joints in SDK order follow."""

ISAACLAB_G1_JOINT_NAMES = (
    "left_hip_pitch_joint", "right_hip_pitch_joint", "waist_yaw_joint",
    "left_hip_roll_joint", "right_hip_roll_joint", "waist_roll_joint",
    "left_hip_yaw_joint", "right_hip_yaw_joint", "waist_pitch_joint",
    "left_knee_joint", "right_knee_joint",
    "left_shoulder_pitch_joint", "right_shoulder_pitch_joint",
    "left_ankle_pitch_joint", "right_ankle_pitch_joint",
    "left_shoulder_roll_joint", "right_shoulder_roll_joint",
    "left_ankle_roll_joint", "right_ankle_roll_joint",
    "left_shoulder_yaw_joint", "right_shoulder_yaw_joint",
    "left_elbow_joint", "right_elbow_joint",
    "left_wrist_roll_joint", "right_wrist_roll_joint",
    "left_wrist_pitch_joint", "right_wrist_pitch_joint",
    "left_wrist_yaw_joint", "right_wrist_yaw_joint",
)
"""Isaac Lab's joint order for the 29-DoF G1 (breadth-first over the kinematic tree), the order of
BeyondMimic's `joint_pos` / `joint_vel` arrays."""

JOINT_ORDER_NAMES = {"sdk": SDK_JOINT_NAMES, "isaaclab": ISAACLAB_G1_JOINT_NAMES}
"""The `joint_order` option's values -> the joint names of an npz's columns."""

QUAT_NORM_TOLERANCE = 1e-3
"""Default largest accepted | |q| - 1 | of a root quaternion in a file."""

MIN_FRAMES = 2
"""Fewest frames a motion may have (velocities and interpolation need two)."""


@dataclass(frozen=True)
class JointLimits:
    """Position limits by joint name: `names` (n,), `lower` and `upper` (n,) rad."""

    names: Tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def of(cls, robot) -> "JointLimits":
        """The limits of a `bcg.robot.RobotDescription`."""
        return cls(tuple(robot.joint_names), np.asarray(robot.q_lower, float), np.asarray(robot.q_upper, float))

    def excess(self, joint_names, joint_pos: np.ndarray) -> np.ndarray:
        """(T, n) rad by which joint_pos (T, n), columns `joint_names`, lies outside the limits
        (negative inside: minus the distance to the nearer limit). KeyError names an unknown joint."""
        unknown = [n for n in joint_names if n not in self.names]
        if unknown:
            raise KeyError(f"no limits for joint(s) {unknown}")
        idx = [self.names.index(n) for n in joint_names]
        lower, upper = np.asarray(self.lower, float)[idx], np.asarray(self.upper, float)[idx]
        return np.maximum(lower - joint_pos, joint_pos - upper)


@dataclass(frozen=True)
class _Raw:
    """A file's arrays before validation; `where(frame)` says where a frame is in the file."""

    fps: float
    joint_names: Tuple[str, ...]
    joint_pos: np.ndarray
    joint_vel: Optional[np.ndarray]
    root_pos: np.ndarray
    root_quat: np.ndarray            # w x y z
    where: Callable[[int], str]
    labels: Tuple[str, str, str, str]  # what the file calls joint_pos / joint_vel / root_pos / root_quat
    quat_columns: str
    order_hint: str = ""             # said after a limit violation when the joint order was not in the file

    def rows(self, first: int, stop: int) -> "_Raw":
        """Frames first..stop-1; `where` still names their place in the file."""
        def where(frame: int) -> str:
            return self.where(frame + first)
        return replace(self, joint_pos=self.joint_pos[first:stop], root_pos=self.root_pos[first:stop],
                       root_quat=self.root_quat[first:stop], where=where,
                       joint_vel=None if self.joint_vel is None else self.joint_vel[first:stop])


def load_motion(source: Union[str, Path, MotionSource], *, limits: Optional[JointLimits] = None,
                clip_to_limits: bool = False, quat_tolerance: float = QUAT_NORM_TOLERANCE,
                limit_tolerance: float = 1e-6, min_frames: int = MIN_FRAMES) -> ReferenceMotion:
    """Read and check a `.csv` (Unitree LAFAN1) or `.npz` (BeyondMimic, mjlab or this suite's) motion.

    source: a path, a `MotionSource` or its string form (crop, CSV fps, npz joint order, despike).
    limits: joint-position limits to check (e.g. `JointLimits.of(robot)`); its names are also the
        known joints. Without it, the known joints are the G1's SDK joints and limits are not checked.
    clip_to_limits: clip violating angles (warning with `JointLimitWarning`) instead of raising.
    quat_tolerance: largest accepted | |q| - 1 | of a root quaternion; quaternions are normalised after.
    limit_tolerance: rad an angle may exceed a limit before it counts as a violation.
    Joint velocities come from the npz when it has them, else central finite differences (with
    `despike`, finite differences of the repaired angles wherever an angle was replaced).
    """
    source = MotionSource.parse(source)
    path = source.path
    if not path.is_file():
        raise MotionFileError(f"motion file {path}: does not exist")
    try:
        if path.suffix == ".csv":
            raw = _read_lafan1_csv(path, source)
        elif path.suffix == ".npz":
            raw = _read_npz(path, source)
        else:
            raise MotionFileError(f"motion file {path}: unknown format {path.suffix!r} (expected .csv or .npz)")
    except MotionFileError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:   # npz: a zip of .npy files
        raise MotionFileError(f"motion file {path}: cannot be read ({type(e).__name__}: {e})") from None
    raw = _time_window(f"motion file {path}", raw, source)
    return _checked(f"motion file {path}", raw, source, limits, clip_to_limits, quat_tolerance, limit_tolerance,
                    min_frames)


def _read_lafan1_csv(path: Path, source: MotionSource) -> _Raw:
    if source.joint_order not in (None, "sdk"):
        raise MotionFileError(f"motion file {path}: joint_order={source.joint_order}: a LAFAN1 CSV is always in "
                              "SDK order (joint_order is for npz files without joint_names)")
    columns = LAFAN1_ROOT_COLUMNS + SDK_JOINT_NAMES
    rows, lines = _csv_rows(path, columns)
    data = _csv_numbers(path, rows, lines, columns)

    def where(frame: int) -> str:
        return f"line {lines[frame]}"
    return _Raw(source.fps or LAFAN1_FPS, SDK_JOINT_NAMES, data[:, 7:], None, data[:, :3], data[:, [6, 3, 4, 5]],
                where, ("joint columns", "joint velocities", "root x y z", "root quaternion"), "columns 4-7 (x y z w)")


def _csv_rows(path: Path, columns: Tuple[str, ...]) -> Tuple[List[List[str]], List[int]]:
    """(the fields of each non-blank line, its line number); MotionFileError for a line of another width."""
    rows, lines = [], []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != len(columns):
            raise MotionFileError(f"motion file {path}: line {number} has {len(fields)} columns, expected "
                                  f"{len(columns)} (root x y z, quaternion x y z w, {len(SDK_JOINT_NAMES)} joints "
                                  "in SDK order)")
        rows.append(fields)
        lines.append(number)
    return rows, lines


def _csv_numbers(path: Path, rows: List[List[str]], lines: List[int], columns: Tuple[str, ...]) -> np.ndarray:
    """(T, columns) the rows as finite numbers; MotionFileError naming the line and column of one that is not."""
    try:
        data = np.array(rows, dtype=float).reshape(len(rows), len(columns))
    except ValueError:
        for row, number in zip(rows, lines):
            for col, field in enumerate(row):
                try:
                    float(field)
                except ValueError:
                    raise MotionFileError(f"motion file {path}: line {number}, column {col + 1} ({columns[col]}): "
                                          f"{field.strip()!r} is not a number") from None
        raise
    bad = np.argwhere(~np.isfinite(data))
    if bad.size:
        row, col = bad[0]
        raise MotionFileError(f"motion file {path}: line {lines[row]}, column {col + 1} ({columns[col]}): "
                              f"{data[row, col]} is not finite")
    return data


def _read_npz(path: Path, source: MotionSource) -> _Raw:
    if source.fps is not None:
        raise MotionFileError(f"motion file {path}: fps={source.fps:g}: an npz states its own frame rate "
                              "(its fps array); the fps option is for CSV files")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    beyondmimic = "body_pos_w" in arrays
    named = () if source.joint_order else ("joint_names",)
    root_arrays = ("body_pos_w", "body_quat_w") if beyondmimic else named + ("root_pos", "root_quat")
    missing = [k for k in ("fps", "joint_pos") + root_arrays if k not in arrays]
    if missing:
        raise MotionFileError(f"motion file {path}: missing array(s) {missing}; expected BeyondMimic / mjlab "
                              "(fps, joint_pos, joint_vel, body_pos_w, body_quat_w) or (fps, joint_pos, "
                              "joint_names, root_pos, root_quat)")
    fps = np.asarray(arrays["fps"], float).reshape(-1)
    if fps.size != 1 or not FPS_RANGE[0] <= fps[0] <= FPS_RANGE[1]:
        raise MotionFileError(f"motion file {path}: fps {arrays['fps']!r} is not one number of "
                              f"{FPS_RANGE[0]:g}-{FPS_RANGE[1]:g} frames/s")
    hint = ""
    if "joint_names" in arrays:
        if source.joint_order:
            raise MotionFileError(f"motion file {path}: joint_order={source.joint_order}, but the file names its "
                                  "joints (joint_names array); the option is for files without one")
        names = tuple(str(s) for s in arrays["joint_names"])
    else:
        names = JOINT_ORDER_NAMES[source.joint_order or "isaaclab"]
        if not source.joint_order:
            hint = (" (the file has no joint_names array and was read in Isaac Lab order, BeyondMimic's; "
                    "an mjlab file is in SDK order: load it as FILE.npz,joint_order=sdk)")
    for key in ("body_pos_w", "body_quat_w"):
        if beyondmimic and np.ndim(arrays[key]) != 3:
            raise MotionFileError(f"motion file {path}: {key} has shape {np.shape(arrays[key])}, expected (T, bodies, "
                                  f"{3 if key == 'body_pos_w' else 4})")
    root_pos = arrays["body_pos_w"][:, 0] if beyondmimic else arrays["root_pos"]
    root_quat = arrays["body_quat_w"][:, 0] if beyondmimic else arrays["root_quat"]
    labels = (("joint_pos", "joint_vel", "body_pos_w[:, 0]", "body_quat_w[:, 0]") if beyondmimic
              else ("joint_pos", "joint_vel", "root_pos", "root_quat"))

    def where(frame: int) -> str:
        return f"frame {frame}"
    return _Raw(float(fps[0]), names, np.asarray(arrays["joint_pos"], float),
                np.asarray(arrays["joint_vel"], float) if "joint_vel" in arrays else None,
                np.asarray(root_pos, float), np.asarray(root_quat, float), where, labels, "(w x y z)", hint)


def _time_window(name: str, raw: _Raw, source: MotionSource) -> _Raw:
    """The frames at source.start_s <= t <= source.end_s (t = frame / fps); MotionFileError when a
    bound lies past the file's end."""
    if source.start_s is None and source.end_s is None:
        return raw
    frames = len(raw.joint_pos)
    duration = (frames - 1) / raw.fps
    for label, value in (("start", source.start_s), ("end", source.end_s)):
        if value is not None and value > duration + 1e-9:
            raise MotionFileError(f"{name}: {label} {value:g} s is past the end of the file ({duration:g} s: "
                                  f"{frames} frames at {raw.fps:g} frames/s)")
    first = int(np.ceil((source.start_s or 0.0) * raw.fps - 1e-6))
    last = frames - 1 if source.end_s is None else int(np.floor(source.end_s * raw.fps + 1e-6))
    return raw.rows(first, last + 1)


def _checked(name: str, raw: _Raw, source: MotionSource, limits: Optional[JointLimits], clip: bool,
             quat_tolerance: float, limit_tolerance: float, min_frames: int) -> ReferenceMotion:
    names = raw.joint_names
    _check_joint_names(name, names, limits.names if limits is not None else SDK_JOINT_NAMES)
    t = len(raw.joint_pos)
    _check_shapes(name, raw, t)
    if t < min_frames:
        raise MotionFileError(f"{name}: {t} frame(s), at least {min_frames} needed")
    _check_finite(name, raw)
    norm = np.linalg.norm(raw.root_quat, axis=-1)
    bad = np.flatnonzero(np.abs(norm - 1.0) > quat_tolerance)
    if bad.size:
        raise MotionFileError(f"{name}: {raw.where(bad[0])}: root quaternion {raw.quat_columns} has norm "
                              f"{norm[bad[0]]:.6g}, not within {quat_tolerance:g} of 1 ({bad.size} frame(s) like it)")
    joint_pos, joint_vel = _despiked(name, raw, source.despike_rad_s)
    if limits is not None:
        joint_pos = _limit_checked(name, raw, joint_pos, limits, clip, limit_tolerance)
    if joint_vel is None:
        joint_vel = np.gradient(joint_pos, 1.0 / raw.fps, axis=0)
    quat = align_quat_signs(raw.root_quat / norm[:, None])
    return ReferenceMotion(raw.fps, names, joint_pos, np.asarray(joint_vel, float), raw.root_pos, quat)


def _check_joint_names(name: str, names: Sequence[str], known: Sequence[str]) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise MotionFileError(f"{name}: unknown joint name(s) {unknown}; known: {list(known)}")
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise MotionFileError(f"{name}: joint name(s) {duplicated} appear more than once")


def _check_shapes(name: str, raw: _Raw, t: int) -> None:
    """Every array of `raw` has `t` frames of its width."""
    n = len(raw.joint_names)
    jp_label, jv_label, rp_label, rq_label = raw.labels
    for label, arr, cols in ((jp_label, raw.joint_pos, n), (jv_label, raw.joint_vel, n),
                             (rp_label, raw.root_pos, 3), (rq_label, raw.root_quat, 4)):
        if arr is not None and np.shape(arr) != (t, cols):
            raise MotionFileError(f"{name}: {label} has shape {np.shape(arr)}, expected ({t}, {cols})"
                                  + (f" ({cols} joint names)" if cols == n else ""))


def _despiked(name: str, raw: _Raw, despike_rad_s: Optional[float]) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """(joint positions, joint velocities or None) with `remove_spikes` applied when `despike_rad_s` is
    set (the velocities of the replaced frames recomputed)."""
    joint_pos, joint_vel = raw.joint_pos, raw.joint_vel
    if despike_rad_s is None:
        return joint_pos, joint_vel
    try:
        joint_pos, replaced = remove_spikes(joint_pos, raw.fps, raw.joint_names, despike_rad_s)
    except MotionFileError as e:
        raise MotionFileError(f"{name}: despike: {e}") from None
    if joint_vel is not None:
        joint_vel = np.where(replaced, np.gradient(joint_pos, 1.0 / raw.fps, axis=0), joint_vel)
    return joint_pos, joint_vel


def _check_finite(name: str, raw: _Raw) -> None:
    for label, arr, columns in zip(raw.labels, (raw.joint_pos, raw.joint_vel, raw.root_pos, raw.root_quat),
                                   (raw.joint_names, raw.joint_names, "xyz", "wxyz")):
        if arr is None:
            continue
        bad = np.argwhere(~np.isfinite(arr))
        if len(bad):
            frame, col = bad[0]
            raise MotionFileError(f"{name}: {raw.where(frame)}, {label} column {col} ({columns[col]}): "
                                  f"{arr[frame, col]} is not finite")


def _limit_checked(name: str, raw: _Raw, q: np.ndarray, limits: JointLimits, clip: bool,
                   tolerance: float) -> np.ndarray:
    """q (T, n), clipped to the limits when `clip`; else MotionFileError listing every violating joint."""
    excess = limits.excess(raw.joint_names, q)
    idx = [limits.names.index(n) for n in raw.joint_names]
    lower, upper = np.asarray(limits.lower, float)[idx], np.asarray(limits.upper, float)[idx]
    violations: List[str] = []
    for col in np.flatnonzero(np.any(excess > tolerance, axis=0)):
        frames = np.flatnonzero(excess[:, col] > tolerance)
        worst = frames[np.argmax(excess[frames, col])]
        side = "below the lower" if q[worst, col] < lower[col] else "above the upper"
        violations.append(f"{raw.joint_names[col]} {side} limit by up to {excess[worst, col]:.4f} rad at "
                          f"{raw.where(worst)} ({frames.size} frame(s), first at {raw.where(frames[0])}; "
                          f"limits [{lower[col]:.4f}, {upper[col]:.4f}])")
    if not violations:
        return q
    if not clip:
        raise MotionFileError(f"{name}: joint-limit violation(s): " + "; ".join(violations)
                              + " (load with clip_to_limits=True to clip)" + raw.order_hint)
    warnings.warn(f"{name}: clipped to the joint limits: " + "; ".join(violations), JointLimitWarning, stacklevel=4)
    return np.clip(q, lower, upper)


def save_motion_csv(motion: ReferenceMotion, path: Union[str, Path]) -> Path:
    """Write `motion` as a Unitree LAFAN1 CSV (joints mapped to SDK order by name), atomically.

    The motion must hold all 29 SDK joints and be at `LAFAN1_FPS` (the format cannot say otherwise).
    Numbers are written with 12 significant digits. Returns the path written.
    """
    path = Path(path)
    if abs(motion.fps - LAFAN1_FPS) > 1e-9:
        raise MotionFileError(f"motion file {path}: a LAFAN1 CSV is at {LAFAN1_FPS:g} frames/s, "
                              f"the motion at {motion.fps:g}")
    table = np.concatenate([motion.root_pos, motion.root_quat[:, [1, 2, 3, 0]],
                            motion.joint_pos[:, motion.joint_index(SDK_JOINT_NAMES)]], axis=1)
    write_atomic(path, lambda f: np.savetxt(f, table, delimiter=",", fmt="%.12g"))
    return path
