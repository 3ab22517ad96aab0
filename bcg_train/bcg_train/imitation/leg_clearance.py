"""Leg clearance: how far into each other the two legs come, as a differentiable penalty.

The training simulator collides only the foot spheres with the floor; MuJoCo and the robot also
collide the legs with each other. A policy trained without that may cross its legs where a reference
brings them close (the LAFAN1 run's turns: the reference's shins come within 10 cm, and a policy
there strikes its own knee with a foot in MuJoCo and falls while it stays up in training). Each leg
is taken as balls: the polyline through its hip-yaw, knee and ankle-roll body origins (thigh and
shin) sampled at `samples_per_segment` points per segment, each of radius LEG_RADIUS_M, and, when
given, points of its foot in the foot body's frame with their radius (the contact spheres: on the
G1 the foot collides through them alone) and the midpoints of every two of them. The penalty is, per
environment,

    sum over (left ball, right ball) of relu(1 - gap / margin)^2,    gap = d - r_left - r_right,

d the distance between the two centres [m]: zero while every gap is at least `margin`, 1 where
two balls touch, growing smoothly as they come closer and beyond.
"""
from itertools import combinations
from typing import Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from bcg.rotations import rotation_matrix

LEG_BODIES = ("hip_yaw_link", "knee_link", "ankle_roll_link")
"""Each leg's polyline, from the hip down (prefixed by `left_` / `right_`)."""
LEG_RADIUS_M = 0.05
"""Radius of the thigh and shin balls [m]: the G1's hip-yaw and knee collision meshes are 9-12 cm
across."""
SIDES = ("left", "right")


class LegClearance:
    """The penalty for one robot: `body_names` (nb,) in the order of the body positions it is given;
    `margin_m` [m]; `feet`: per side, (foot body name, (K, 3) points in that body's frame [m], their
    radius [m]), or None to stop each leg at its ankle."""

    def __init__(self, body_names: Sequence[str], margin_m: float,
                 feet: Optional[Mapping[str, Tuple[str, np.ndarray, float]]] = None, samples_per_segment: int = 5):
        names = list(body_names)
        wanted = [f"{side}_{b}" for side in SIDES for b in LEG_BODIES] + [foot[0] for foot in (feet or {}).values()]
        missing = [n for n in wanted if n not in names]
        if missing:
            raise ValueError(f"leg clearance: the robot has no bodies {', '.join(missing)}")
        if margin_m <= 0.0 or samples_per_segment < 2:
            raise ValueError(f"leg clearance: needs a margin > 0 m and >= 2 samples per segment, got "
                             f"{margin_m!r} m and {samples_per_segment!r}")
        self.margin_m = margin_m
        self._chain = {side: [names.index(f"{side}_{b}") for b in LEG_BODIES] for side in SIDES}
        self._t = torch.linspace(0.0, 1.0, samples_per_segment)
        self._feet = {}
        polyline = (len(LEG_BODIES) - 1) * samples_per_segment
        self._radius = {side: torch.full((polyline,), LEG_RADIUS_M, dtype=torch.float64) for side in SIDES}
        for side, (body, points, radius) in (feet or {}).items():
            p = np.asarray(points, dtype=float).reshape(-1, 3)
            p = np.concatenate([p] + [(p[i] + p[j])[None] / 2.0 for i, j in combinations(range(len(p)), 2)])
            self._feet[side] = (names.index(body), torch.as_tensor(p))
            foot_radii = torch.full((len(p),), float(radius), dtype=torch.float64)
            self._radius[side] = torch.cat([self._radius[side], foot_radii])

    def points(self, body_pos: torch.Tensor, body_quat: Optional[torch.Tensor], side: str) -> torch.Tensor:
        """(..., P, 3) [m]: the `side` leg's ball centres from body positions (..., nb, 3) and, with
        feet, orientations (..., nb, 4) (w x y z), world frame; `radii(side)` their radii."""
        chain = body_pos[..., self._chain[side], :]                  # (..., 3 bodies, 3)
        start, end = chain[..., :-1, None, :], chain[..., 1:, None, :]
        t = self._t.to(body_pos)[:, None]                            # (K, 1)
        leg = (start + t * (end - start)).flatten(-3, -2)            # (..., segments * K, 3)
        if side not in self._feet:
            return leg
        if body_quat is None:
            raise ValueError("leg clearance: the feet's points need the bodies' orientations")
        body, local = self._feet[side]
        rot = rotation_matrix(body_quat[..., body, :])               # (..., 3, 3)
        foot = body_pos[..., body, None, :] + (rot[..., None, :, :] @ local.to(body_pos)[..., None]).squeeze(-1)
        return torch.cat([leg, foot], dim=-2)

    def radii(self, side: str) -> torch.Tensor:
        """(P,) [m]: the radii of the `side` leg's balls, in `points`' order."""
        return self._radius[side]

    def gaps(self, body_pos: torch.Tensor, body_quat: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(..., P, P) [m]: between every ball of the left leg and every one of the right, surface to
        surface (negative: overlapping)."""
        left, right = self.points(body_pos, body_quat, "left"), self.points(body_pos, body_quat, "right")
        d = torch.linalg.vector_norm(left[..., :, None, :] - right[..., None, :, :], dim=-1)
        return d - self.radii("left").to(d)[:, None] - self.radii("right").to(d)[None, :]

    def penalty(self, body_pos: torch.Tensor, body_quat: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(...,) >= 0, differentiable in body_pos (..., nb, 3) [m] and body_quat (..., nb, 4)."""
        return (torch.relu(1.0 - self.gaps(body_pos, body_quat) / self.margin_m) ** 2).sum(dim=(-2, -1))

    def min_gap(self, body_pos: torch.Tensor, body_quat: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(...,) [m]: the closest the two legs' balls come, surface to surface."""
        return self.gaps(body_pos, body_quat).flatten(-2).amin(-1)
