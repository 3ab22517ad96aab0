"""A reference motion ready for training: at the control rate, with velocities and body frames.

T = frames, n = joints (robot description order), B = robot bodies (MuJoCo order, root first).
Frame i is at time i / fps seconds. Quaternions are (w, x, y, z).
"""
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Tuple, Union

import numpy as np
from scipy.spatial.transform import Rotation

from bcg.motion import ReferenceFrames
from bcg.rotations import heading, turned_about_vertical

if TYPE_CHECKING:   # torch is imported on use (`to_torch`)
    import torch


@dataclass(frozen=True)
class MotionClip:
    """Numpy arrays (float64); `to_torch` gives the same fields as tensors."""

    name: str
    """What it was made from: a built-in name ("run") or the file path."""
    fps: float
    """Frames per second (the control rate)."""
    joint_names: Tuple[str, ...]
    """(n,) the robot description's joint order."""
    body_names: Tuple[str, ...]
    """(B,) the robot's bodies in MuJoCo order, root (pelvis) first."""
    root_pos: np.ndarray
    """(T, 3) m, root (pelvis) position, world."""
    root_quat: np.ndarray
    """(T, 4) root orientation (w x y z), consecutive frames sign-aligned."""
    root_lin_vel: np.ndarray
    """(T, 3) m/s, root linear velocity, world frame (finite differences)."""
    root_ang_vel: np.ndarray
    """(T, 3) rad/s, root angular velocity, world frame (finite differences)."""
    joint_pos: np.ndarray
    """(T, n) rad."""
    joint_vel: np.ndarray
    """(T, n) rad/s (finite differences)."""
    body_pos: np.ndarray
    """(T, B, 3) m, body frame origins by forward kinematics, world."""
    body_quat: np.ndarray
    """(T, B, 4) body orientations (w x y z) by forward kinematics, world."""

    @property
    def num_frames(self) -> int:
        return len(self.joint_pos)

    @property
    def duration_s(self) -> float:
        return (self.num_frames - 1) / self.fps

    @property
    def root_ang_vel_body(self) -> np.ndarray:
        """(T, 3) rad/s, root angular velocity in the root frame (MuJoCo's and the simulator's qvel[3:6])."""
        return Rotation.from_quat(self.root_quat, scalar_first=True).inv().apply(self.root_ang_vel)

    def generalized(self) -> Tuple[np.ndarray, np.ndarray]:
        """(q (T, 7 + n), qd (T, 6 + n)) in the simulator's layout: root position, root quaternion
        (w x y z), joint angles; root linear velocity (world), root angular velocity (root frame),
        joint rates. Joints in `joint_names` order (reference state initialisation)."""
        q = np.concatenate([self.root_pos, self.root_quat, self.joint_pos], axis=1)
        qd = np.concatenate([self.root_lin_vel, self.root_ang_vel_body, self.joint_vel], axis=1)
        return q, qd

    def rest_state(self, frame: int, default_q: np.ndarray, standing_height: float) -> Tuple[np.ndarray, np.ndarray]:
        """(q (7 + n,), qd (6 + n,)) in `generalized`'s layout: standing still where frame `frame` is, as
        the policy node starts the robot. Joints at `default_q` (n,) rad, the root upright at
        `standing_height` m over the frame's root position and turned to its heading, no velocity."""
        upright = turned_about_vertical(np.array([1.0, 0.0, 0.0, 0.0]), heading(self.root_quat[frame]))
        q = np.concatenate([self.root_pos[frame, :2], [standing_height], upright, default_q])
        return q, np.zeros(6 + len(default_q))

    def to_torch(self, device="cpu", dtype=None) -> "MotionClipTensors":
        """The arrays as torch tensors on `device` (default dtype float32)."""
        import torch
        dtype = dtype or torch.float32
        arrays = {f.name: torch.as_tensor(getattr(self, f.name), dtype=dtype, device=device)
                  for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray)}
        return MotionClipTensors(name=self.name, fps=self.fps, joint_names=self.joint_names,
                                 body_names=self.body_names, **arrays)


@dataclass(frozen=True)
class MotionClipTensors:
    """`MotionClip` with torch tensors; same fields, shapes and units."""

    name: str
    fps: float
    joint_names: Tuple[str, ...]
    body_names: Tuple[str, ...]
    root_pos: "torch.Tensor"
    root_quat: "torch.Tensor"
    root_lin_vel: "torch.Tensor"
    root_ang_vel: "torch.Tensor"
    joint_pos: "torch.Tensor"
    joint_vel: "torch.Tensor"
    body_pos: "torch.Tensor"
    body_quat: "torch.Tensor"

    @property
    def num_frames(self) -> int:
        return self.joint_pos.shape[0]

    def frame_index(self, times_s: "torch.Tensor") -> "torch.Tensor":
        """Index (long, shape of times_s) of the frame nearest to each time in seconds, clamped to the clip."""
        return (times_s * self.fps).round().long().clamp(0, self.num_frames - 1)


def reference_frames(clip: Union[MotionClip, MotionClipTensors], frames: Any,
                     joints: Any = slice(None)) -> ReferenceFrames:
    """The observation's reference samples of `clip` at frame indices `frames` (..., F) (numpy or
    torch, as the clip), the joints `joints` of the clip's order (default all, in its order)."""
    return ReferenceFrames(joint_pos=clip.joint_pos[frames][..., joints],
                           joint_vel=clip.joint_vel[frames][..., joints],
                           root_pos=clip.root_pos[frames], root_quat=clip.root_quat[frames],
                           root_lin_vel=clip.root_lin_vel[frames])
