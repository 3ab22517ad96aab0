"""LegClearance: the two legs as balls (thigh and shin along the body origins, the feet's points) and
the penalty for bringing them close."""
import itertools

import numpy as np
import pytest
import torch

from bcg_train.imitation.leg_clearance import LEG_RADIUS_M, LegClearance

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


def upright() -> torch.Tensor:
    quat = torch.zeros(7, 4, dtype=torch.float64)
    quat[:, 0] = 1.0
    return quat


def reference_penalty(body_pos: np.ndarray, margin: float, k: int) -> float:
    """The docstring's formula with explicit loops (legs without feet)."""
    t = np.linspace(0.0, 1.0, k)
    pts = {}
    for side, first in (("left", 1), ("right", 4)):
        chain = body_pos[first:first + 3]
        pts[side] = [a + s * (b - a) for a, b in zip(chain[:-1], chain[1:]) for s in t]
    return sum(max(0.0, 1.0 - (np.linalg.norm(p - q) - 2 * LEG_RADIUS_M) / margin) ** 2
               for p, q in itertools.product(pts["left"], pts["right"]))


def test_legs_apart_cost_nothing_and_close_legs_cost_the_formula():
    lc = LegClearance(NAMES, margin_m=0.02, samples_per_segment=5)
    apart = legs(0.3)
    assert lc.penalty(apart).item() == 0.0
    assert lc.min_gap(apart).item() == pytest.approx(0.3 - 2 * LEG_RADIUS_M)
    close = legs(0.11, knee_forward=0.02)                          # shins 1 cm apart, surface to surface
    expected = reference_penalty(close.numpy(), 0.02, 5)
    assert expected > 1.0
    assert lc.penalty(close).item() == pytest.approx(expected, rel=1e-12)
    assert lc.min_gap(close).item() == pytest.approx(0.01)
    batch = torch.stack([apart, close])[None]                      # (1, 2, 7, 3): any leading shape
    np.testing.assert_allclose(lc.penalty(batch).numpy(), [[0.0, expected]], rtol=1e-12)


def test_its_gradient_pushes_the_legs_apart():
    lc = LegClearance(NAMES, margin_m=0.02)
    pos = legs(0.11).requires_grad_(True)
    lc.penalty(pos).backward()
    # descending the penalty moves the left leg (+y) further left and the right leg further right
    assert (pos.grad[1:4, 1] < 0).all() and (pos.grad[4:7, 1] > 0).all()
    assert pos.grad[0].abs().sum() == 0.0


def test_feet_add_their_points_and_midpoints_turned_with_the_foot():
    """A toe 0.12 m forward of each ankle, 5 mm balls: a foot turned inwards about z reaches the other shin."""
    toe_heel = np.array([[0.12, 0.0, 0.0], [-0.04, 0.0, 0.0]])
    feet = {side: (f"{side}_ankle_roll_link", toe_heel, 0.005) for side in ("left", "right")}
    lc = LegClearance(NAMES, 0.02, feet, samples_per_segment=5)
    pos, quat = legs(0.18), upright()
    left = lc.points(pos, quat, "left")
    assert left.shape == (2 * 5 + 3, 3) and lc.radii("left").shape == (13,)   # polyline, toe, heel, midpoint
    np.testing.assert_allclose(left[-3:].numpy(), pos[3].numpy() + [[0.12, 0, 0], [-0.04, 0, 0], [0.04, 0, 0]])
    np.testing.assert_allclose(lc.radii("left")[-3:].numpy(), 0.005)
    assert lc.penalty(pos, quat).item() == 0.0
    c = np.cos(np.pi / 4)
    quat[3] = torch.tensor([c, 0.0, 0.0, -c])                     # left foot turned towards -y (the right leg)
    assert lc.min_gap(pos, quat).item() == pytest.approx(0.18 - 0.12 - 0.005 - LEG_RADIUS_M)
    assert lc.penalty(pos, quat).item() > 0.0
    with pytest.raises(ValueError, match="orientations"):
        lc.penalty(pos)


def test_bad_settings_and_a_robot_without_legs_are_named():
    with pytest.raises(ValueError, match="right_knee_link"):
        LegClearance([n for n in NAMES if n != "right_knee_link"], 0.02)
    with pytest.raises(ValueError, match="left_foot"):
        LegClearance(NAMES, 0.02, {"left": ("left_foot", np.zeros((1, 3)), 0.005)})
    with pytest.raises(ValueError, match="margin > 0"):
        LegClearance(NAMES, 0.0)
    with pytest.raises(ValueError, match="samples"):
        LegClearance(NAMES, 0.02, samples_per_segment=1)
