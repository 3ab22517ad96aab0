"""ADD features phi of a humanoid state (docs/method.md, "Training"): the same function for the simulated
state (differentiable) and the reference.

phi = [root position (3) | root orientation, 6-D (6) | joint positions (n) | joint velocities (n) |
body positions relative to the root, root frame ((B - 1) x 3) | root linear velocity, root frame (3) |
root angular velocity, root frame (3)], F = 15 + 2 n + 3 (B - 1) numbers. Units: m, rad, m/s, rad/s.
"""
from dataclasses import dataclass
from typing import Optional

import torch

from bcg.rotations import quat_rotate_inverse, rot6d


@dataclass
class PoseState:
    """A batch of humanoid states (leading shape (...,)), quaternions (w x y z)."""

    root_pos: torch.Tensor       # (..., 3) m, world
    root_quat: torch.Tensor      # (..., 4) world
    joint_pos: torch.Tensor      # (..., n) rad
    joint_vel: torch.Tensor      # (..., n) rad/s
    body_pos: torch.Tensor       # (..., B, 3) m, world, root first
    root_lin_vel: torch.Tensor   # (..., 3) m/s, world
    root_ang_vel: torch.Tensor   # (..., 3) rad/s, root frame
    body_quat: Optional[torch.Tensor] = None   # (..., B, 4) world, where known (not a feature)


def feature_dim(num_joints: int, num_bodies: int) -> int:
    return 15 + 2 * num_joints + 3 * (num_bodies - 1)


def add_features(s: PoseState) -> torch.Tensor:
    """phi (..., F) of `s`."""
    rel = quat_rotate_inverse(s.root_quat[..., None, :], s.body_pos[..., 1:, :] - s.root_pos[..., None, :])
    return torch.cat([s.root_pos, rot6d(s.root_quat), s.joint_pos, s.joint_vel, rel.flatten(-2),
                      quat_rotate_inverse(s.root_quat, s.root_lin_vel), s.root_ang_vel], dim=-1)

