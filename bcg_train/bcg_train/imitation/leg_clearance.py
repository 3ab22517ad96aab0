"""Leg clearance: how far into each other the two legs come, as a differentiable penalty.

The training simulator collides only the foot spheres with the floor; MuJoCo and the robot also
collide the legs with each other. A policy trained without that may cross its legs where a reference
brings them close (the LAFAN1 run's turns: the reference's shins come within 10 cm, and a policy
there kicks its own knee in MuJoCo and falls while it stays up in training). Each leg is taken as
the polyline through its hip-yaw, knee and ankle-roll body origins (thigh and shin), sampled at
`samples_per_segment` points per segment; the penalty is, per environment,

    sum over (left point, right point) of relu(1 - d / clearance)^2,

d the distance between the two points [m]: zero while every pair is at least `clearance` apart,
growing smoothly as they come closer.
"""
from typing import Sequence

import torch

LEG_BODIES = ("hip_yaw_link", "knee_link", "ankle_roll_link")
"""Each leg's polyline, from the hip down (prefixed by `left_` / `right_`)."""


class LegClearance:
    """The penalty for one robot: `body_names` (nb,) in the order of the body positions it is given."""

    def __init__(self, body_names: Sequence[str], clearance_m: float, samples_per_segment: int = 5):
        names = list(body_names)
        missing = [f"{side}_{b}" for side in ("left", "right") for b in LEG_BODIES if f"{side}_{b}" not in names]
        if missing:
            raise ValueError(f"leg clearance: the robot has no bodies {', '.join(missing)}")
        if clearance_m <= 0.0 or samples_per_segment < 2:
            raise ValueError(f"leg clearance: needs clearance > 0 m and >= 2 samples per segment, got "
                             f"{clearance_m!r} m and {samples_per_segment!r}")
        self.clearance_m = clearance_m
        self._chain = {side: [names.index(f"{side}_{b}") for b in LEG_BODIES] for side in ("left", "right")}
        self._t = torch.linspace(0.0, 1.0, samples_per_segment)

    def points(self, body_pos: torch.Tensor, side: str) -> torch.Tensor:
        """(..., P, 3) [m]: the sampled polyline of the `side` leg from body positions (..., nb, 3)."""
        chain = body_pos[..., self._chain[side], :]                  # (..., 3 bodies, 3)
        start, end = chain[..., :-1, None, :], chain[..., 1:, None, :]
        t = self._t.to(body_pos)[:, None]                            # (K, 1)
        return (start + t * (end - start)).flatten(-3, -2)           # (..., segments * K, 3)

    def distances(self, body_pos: torch.Tensor) -> torch.Tensor:
        """(..., P, P) [m]: between every sampled point of the left leg and every one of the right."""
        left, right = self.points(body_pos, "left"), self.points(body_pos, "right")
        return torch.linalg.vector_norm(left[..., :, None, :] - right[..., None, :, :], dim=-1)

    def penalty(self, body_pos: torch.Tensor) -> torch.Tensor:
        """(...,) >= 0, differentiable in body_pos (..., nb, 3) [m]."""
        return (torch.relu(1.0 - self.distances(body_pos) / self.clearance_m) ** 2).sum(dim=(-2, -1))

    def min_distance(self, body_pos: torch.Tensor) -> torch.Tensor:
        """(...,) [m]: the closest the two sampled legs come."""
        return self.distances(body_pos).flatten(-2).amin(-1)
