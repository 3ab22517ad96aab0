"""LegClearance: the two legs' sampled thigh-shin polylines and the penalty for bringing them close."""
import itertools

import numpy as np
import pytest
import torch

from bcg_train.imitation.leg_clearance import LegClearance

NAMES = ("pelvis", "left_hip_yaw_link", "left_knee_link", "left_ankle_roll_link", "right_hip_yaw_link",
         "right_knee_link", "right_ankle_roll_link")


def legs(gap: float, knee_forward: float = 0.0) -> torch.Tensor:
    """(7, 3) body origins [m]: two straight legs hip 0.9 m, knee 0.5 m, ankle 0.1 m high, `gap` apart
    in y; the left knee moved `knee_forward` in x."""
    pos = np.zeros((7, 3))
    pos[0] = (0.0, 0.0, 1.0)
    for side, y in ((1, gap / 2), (4, -gap / 2)):
        pos[side:side + 3] = [(0.0, y, 0.9), (0.0, y, 0.5), (0.0, y, 0.1)]
    pos[2, 0] = knee_forward
    return torch.tensor(pos, dtype=torch.float64)


def reference_penalty(body_pos: np.ndarray, clearance: float, k: int) -> float:
    """The docstring's formula with explicit loops."""
    t = np.linspace(0.0, 1.0, k)
    pts = {}
    for side, first in (("left", 1), ("right", 4)):
        chain = body_pos[first:first + 3]
        pts[side] = [a + s * (b - a) for a, b in zip(chain[:-1], chain[1:]) for s in t]
    return sum(max(0.0, 1.0 - np.linalg.norm(p - q) / clearance) ** 2
               for p, q in itertools.product(pts["left"], pts["right"]))


def test_legs_apart_cost_nothing_and_close_legs_cost_the_formula():
    lc = LegClearance(NAMES, clearance_m=0.12, samples_per_segment=5)
    apart = legs(0.3)
    assert lc.penalty(apart).item() == 0.0
    assert lc.min_distance(apart).item() == pytest.approx(0.3)
    close = legs(0.06, knee_forward=0.02)
    expected = reference_penalty(close.numpy(), 0.12, 5)
    assert expected > 1.0
    assert lc.penalty(close).item() == pytest.approx(expected, rel=1e-12)
    assert lc.min_distance(close).item() == pytest.approx(0.06)
    batch = torch.stack([apart, close])[None]                      # (1, 2, 7, 3): any leading shape
    np.testing.assert_allclose(lc.penalty(batch).numpy(), [[0.0, expected]], rtol=1e-12)


def test_its_gradient_pushes_the_legs_apart():
    lc = LegClearance(NAMES, clearance_m=0.12)
    pos = legs(0.08).requires_grad_(True)
    lc.penalty(pos).backward()
    # descending the penalty moves the left leg (+y) further left and the right leg further right
    assert (pos.grad[1:4, 1] < 0).all() and (pos.grad[4:7, 1] > 0).all()
    assert pos.grad[0].abs().sum() == 0.0


def test_bad_settings_and_a_robot_without_legs_are_named():
    with pytest.raises(ValueError, match="right_knee_link"):
        LegClearance([n for n in NAMES if n != "right_knee_link"], 0.12)
    with pytest.raises(ValueError, match="clearance > 0"):
        LegClearance(NAMES, 0.0)
    with pytest.raises(ValueError, match="samples"):
        LegClearance(NAMES, 0.1, samples_per_segment=1)
