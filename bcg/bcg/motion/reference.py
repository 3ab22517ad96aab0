"""A reference motion in memory, and samples of it at the times a policy looks ahead to."""
import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence, Tuple

import numpy as np

from ..rotations import turned_about_vertical
from .errors import MotionFileError


@dataclass(frozen=True)
class ReferenceFrames:
    """Reference-motion samples at the future frames an observation spec asks for. F = number of frames."""

    joint_pos: Any
    """(..., F, n) rad, policy joint order."""
    joint_vel: Any
    """(..., F, n) rad/s, policy joint order."""
    root_pos: Any
    """(..., F, 3) m, world frame."""
    root_quat: Any
    """(..., F, 4) (w, x, y, z), root (pelvis) orientation in the world."""
    root_lin_vel: Any
    """(..., F, 3) m/s, root (pelvis) linear velocity in the world frame."""


@dataclass(frozen=True)
class ReferenceMotion:
    """A motion sampled at `fps`. Arrays have T rows; joints in `joint_names` order."""

    fps: float
    joint_names: Tuple[str, ...]
    joint_pos: np.ndarray   # (T, n) rad
    joint_vel: np.ndarray   # (T, n) rad/s
    root_pos: np.ndarray    # (T, 3) m, world
    root_quat: np.ndarray   # (T, 4) w x y z, unit, consecutive frames in the same hemisphere

    @cached_property
    def root_lin_vel(self) -> np.ndarray:
        """(T, 3) m/s, world: `finite_difference` of the root position."""
        return finite_difference(self.root_pos, 1.0 / self.fps)

    @property
    def num_frames(self) -> int:
        return len(self.joint_pos)

    @property
    def duration_s(self) -> float:
        return (self.num_frames - 1) / self.fps

    def joint_index(self, names: Sequence[str]) -> np.ndarray:
        """Columns of `names` in this motion; MotionFileError names any joint it lacks."""
        missing = [n for n in names if n not in self.joint_names]
        if missing:
            raise MotionFileError(f"motion has no joint(s) {missing}")
        return np.array([self.joint_names.index(n) for n in names])

    def turned(self, angle_rad: float) -> "ReferenceMotion":
        """The same motion turned by `angle_rad` [rad] about the vertical through its first frame's
        root: root orientations and horizontal root positions (hence velocities) turn, joints do not."""
        c, s = np.cos(angle_rad), np.sin(angle_rad)
        start = self.root_pos[0, :2]
        xy = (self.root_pos[:, :2] - start) @ np.array([[c, s], [-s, c]]) + start
        return dataclasses.replace(self, root_pos=np.concatenate([xy, self.root_pos[:, 2:]], axis=1),
                                   root_quat=turned_about_vertical(self.root_quat, angle_rad))

    def sample(self, times_s: np.ndarray, columns: np.ndarray) -> ReferenceFrames:
        """Frames at `times_s` (F,) seconds (clamped to the motion), joints `columns`.

        Joints, root position and root velocity are interpolated linearly, the root quaternion by slerp.
        """
        x = np.clip(np.asarray(times_s, np.float64) * self.fps, 0.0, self.num_frames - 1)
        i0 = np.floor(x).astype(int)
        i1 = np.minimum(i0 + 1, self.num_frames - 1)
        a = (x - i0)[:, None]

        def lerp(arr):
            return arr[i0] * (1 - a) + arr[i1] * a
        return ReferenceFrames(joint_pos=lerp(self.joint_pos)[:, columns], joint_vel=lerp(self.joint_vel)[:, columns],
                               root_pos=lerp(self.root_pos),
                               root_quat=quat_slerp(self.root_quat[i0], self.root_quat[i1], a[:, 0]),
                               root_lin_vel=lerp(self.root_lin_vel))


def finite_difference(x: np.ndarray, dt: float) -> np.ndarray:
    """d/dt of samples x (T, ...) spaced dt: central differences inside, second-order one-sided at the ends."""
    return np.gradient(x, dt, axis=0, edge_order=2 if len(x) > 2 else 1)


def quat_slerp(q0: np.ndarray, q1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical linear interpolation from unit quaternions q0 to q1 (..., 4) at fractions t (...),
    along the shorter arc (q1 is negated where q0 . q1 < 0). Returns unit quaternions (..., 4)."""
    q0, q1, t = np.asarray(q0, float), np.asarray(q1, float), np.asarray(t, float)[..., None]
    dot = np.sum(q0 * q1, axis=-1, keepdims=True)
    q1 = np.where(dot < 0, -q1, q1)
    theta = np.arccos(np.clip(np.abs(dot), 0.0, 1.0))
    sin = np.sin(theta)
    near = sin < 1e-9
    safe = np.where(near, 1.0, sin)
    w0 = np.where(near, 1 - t, np.sin((1 - t) * theta) / safe)
    w1 = np.where(near, t, np.sin(t * theta) / safe)
    out = w0 * q0 + w1 * q1
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def align_quat_signs(quat: np.ndarray) -> np.ndarray:
    """Flip the signs of quaternions (T, 4) so each has a non-negative dot product with the previous one."""
    flips = np.sum(quat[1:] * quat[:-1], axis=-1) < 0
    sign = np.concatenate([[1.0], np.where(np.cumsum(flips) % 2 == 1, -1.0, 1.0)])
    return quat * sign[:, None]
