"""Reference motions, read by joint name so any joint order maps correctly.

Formats:
- Unitree's retargeted LAFAN1 CSV for the G1 (`.csv`): 30 frames/s, no header, 36 columns: root
  x y z (m), root quaternion x y z w, then the 29 joint angles (rad) in SDK order.
- `.npz` with `fps`, `joint_pos` (T, n), `joint_names` (n,), `root_pos` (T, 3) and `root_quat`
  (T, 4, w x y z); `joint_vel` (T, n) optional (finite differences otherwise).
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Tuple, Union

import numpy as np

from .observation import ReferenceFrames

LAFAN1_FPS = 30.0


class MotionFileError(ValueError):
    """The motion file is missing or malformed; the message names the file and the field."""


@dataclass(frozen=True)
class ReferenceMotion:
    """A motion sampled at `fps`. Arrays have T rows; joints in `joint_names` order."""

    fps: float
    joint_names: Tuple[str, ...]
    joint_pos: np.ndarray   # (T, n) rad
    joint_vel: np.ndarray   # (T, n) rad/s
    root_pos: np.ndarray    # (T, 3) m
    root_quat: np.ndarray   # (T, 4) w x y z

    @property
    def duration_s(self) -> float:
        return (len(self.joint_pos) - 1) / self.fps

    def joint_index(self, names: Sequence[str]) -> np.ndarray:
        """Columns of `names` in this motion; MotionFileError names any joint it lacks."""
        missing = [n for n in names if n not in self.joint_names]
        if missing:
            raise MotionFileError(f"motion has no joint(s) {missing}")
        return np.array([self.joint_names.index(n) for n in names])

    def sample(self, times_s: np.ndarray, columns: np.ndarray) -> ReferenceFrames:
        """Linear interpolation at `times_s` (F,) seconds (clamped to the motion), joints `columns`.

        Quaternions are interpolated component-wise and renormalised (fine between 30 fps frames).
        """
        x = np.clip(np.asarray(times_s, np.float64) * self.fps, 0.0, len(self.joint_pos) - 1)
        i0 = np.floor(x).astype(int)
        i1 = np.minimum(i0 + 1, len(self.joint_pos) - 1)
        a = (x - i0)[:, None]

        def lerp(arr):
            return arr[i0] * (1 - a) + arr[i1] * a
        quat = lerp(self.root_quat)
        quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
        return ReferenceFrames(joint_pos=lerp(self.joint_pos)[:, columns], joint_vel=lerp(self.joint_vel)[:, columns],
                               root_pos=lerp(self.root_pos), root_quat=quat)


def _finite_difference(pos: np.ndarray, fps: float) -> np.ndarray:
    return np.gradient(pos, 1.0 / fps, axis=0) if len(pos) > 1 else np.zeros_like(pos)


def load_motion(path: Union[str, Path]) -> ReferenceMotion:
    """Read a `.csv` (Unitree LAFAN1) or `.npz` motion."""
    from bcg.robot import SDK_JOINT_NAMES
    path = Path(path)
    if not path.is_file():
        raise MotionFileError(f"motion file {path}: does not exist")
    try:
        if path.suffix == ".csv":
            data = np.loadtxt(path, delimiter=",", ndmin=2)
            if data.shape[1] != 7 + len(SDK_JOINT_NAMES):
                raise MotionFileError(f"motion file {path}: {data.shape[1]} columns, expected 36 "
                                      "(root xyz, quat xyzw, 29 joints)")
            quat = data[:, [6, 3, 4, 5]]
            fps, names, pos, root = LAFAN1_FPS, SDK_JOINT_NAMES, data[:, 7:], data[:, :3]
            vel = _finite_difference(pos, fps)
        elif path.suffix == ".npz":
            z = np.load(path, allow_pickle=False)
            missing = [k for k in ("fps", "joint_pos", "joint_names", "root_pos", "root_quat") if k not in z]
            if missing:
                raise MotionFileError(f"motion file {path}: missing array(s) {missing}")
            fps, names = float(z["fps"]), tuple(str(s) for s in z["joint_names"])
            pos, root, quat = z["joint_pos"], z["root_pos"], z["root_quat"]
            vel = z["joint_vel"] if "joint_vel" in z else _finite_difference(pos, fps)
        else:
            raise MotionFileError(f"motion file {path}: unknown format (expected .csv or .npz)")
    except (OSError, ValueError) as e:
        if isinstance(e, MotionFileError):
            raise
        raise MotionFileError(f"motion file {path}: cannot be read ({e})") from None
    t = len(pos)
    for name, arr, cols in (("joint_pos", pos, len(names)), ("joint_vel", vel, len(names)),
                            ("root_pos", root, 3), ("root_quat", quat, 4)):
        if np.shape(arr) != (t, cols):
            raise MotionFileError(f"motion file {path}: {name} has shape {np.shape(arr)}, expected ({t}, {cols})")
        if not np.all(np.isfinite(arr)):
            raise MotionFileError(f"motion file {path}: {name} contains NaN or Inf")
    if t == 0 or fps <= 0:
        raise MotionFileError(f"motion file {path}: empty or fps {fps} <= 0")
    quat = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    return ReferenceMotion(fps, tuple(names), np.asarray(pos, float), np.asarray(vel, float),
                           np.asarray(root, float), quat)
