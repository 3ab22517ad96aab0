"""The lead-in from rest (`bcg.motion.lead_in`): the reference begins at the rest state, reaches the
motion's own frames after the lead-in, and adds no jump in between."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bcg.motion import MotionFileError, ReferenceMotion
from bcg.motion.lead_in import LeadIn, blend_weight, led_in
from bcg.motion.reference import finite_difference
from bcg.rotations import heading, turned_about_vertical

FPS, N = 50.0, 6


def moving_motion(seconds=3.0, speed=1.7, yaw=0.7, phase=0.3):
    """A motion that opens mid-move: joints swinging, the root travelling at `speed` m/s, bobbing and
    leaning, turned by `yaw` rad."""
    t = np.arange(int(seconds * FPS) + 1) / FPS
    joint_pos = 0.6 * np.sin(2.0 * np.pi * 1.3 * t[:, None] + phase + np.arange(N))
    root_pos = np.stack([speed * t * np.cos(yaw), speed * t * np.sin(yaw), 0.75 + 0.04 * np.sin(6.0 * t)], axis=1)
    lean = np.stack([np.cos(0.1 + 0.05 * t), np.sin(0.1 + 0.05 * t), 0 * t, 0 * t], axis=1)    # about x
    root_quat = turned_about_vertical(lean, yaw + 0.2 * t)
    return ReferenceMotion(FPS, tuple(f"j{i}" for i in range(N)), joint_pos, finite_difference(joint_pos, 1 / FPS),
                           root_pos, root_quat)


REST = LeadIn(1.0, np.linspace(-0.2, 0.3, N), 0.79)


def test_the_weight_goes_from_0_to_1_with_flat_ends():
    t = np.linspace(0.0, 2.0, 2001)
    w = blend_weight(t, 1.0)
    assert w[0] == 0.0 and np.all(w[t >= 1.0] == 1.0) and np.all(np.diff(w) >= 0)
    dw = np.gradient(w, t)
    assert abs(dw[0]) < 1e-5 and abs(dw[1000]) < 1e-3 and np.isclose(dw.max(), 15 / 8, rtol=1e-3)


def test_the_reference_begins_at_rest_where_the_motion_begins_facing_its_way():
    motion = moving_motion()
    out = led_in(motion, REST)
    assert np.allclose(out.joint_pos[0], REST.rest_joint_pos)
    assert np.abs(out.joint_vel[0]).max() < 0.01 < np.abs(motion.joint_vel[0]).max()   # differences of a flat start
    assert np.allclose(out.root_pos[0, :2], motion.root_pos[0, :2]) and np.isclose(out.root_pos[0, 2], 0.79)
    assert np.abs(out.root_lin_vel[0]).max() < 0.01
    assert np.allclose(out.root_quat[0], [np.cos(0.35), 0, 0, np.sin(0.35)])      # upright, heading 0.7 rad
    assert np.isclose(heading(out.root_quat[0]), heading(motion.root_quat[0]))


def test_after_the_lead_in_it_is_the_motion_with_its_velocities():
    motion = moving_motion()
    out = led_in(motion, REST)
    after = np.arange(motion.num_frames) / FPS >= 1.0
    assert np.array_equal(out.joint_pos[after], motion.joint_pos[after])
    assert np.array_equal(out.root_pos[after, 2], motion.root_pos[after, 2])
    behind = motion.root_pos[after, :2] - out.root_pos[after, :2]          # the path, shifted back once
    assert np.allclose(behind, behind[0], atol=1e-12)
    assert np.isclose(np.linalg.norm(behind[0]), 1.7 * 0.5, rtol=0.02)     # v D (1 - mean w) = v D / 2
    same = np.abs(np.sum(out.root_quat[after] * motion.root_quat[after], axis=1))  # sign free
    assert np.allclose(same, 1.0)
    inside = after & (np.arange(motion.num_frames) >= int(FPS) + 2)           # past the differences' reach
    assert np.allclose(out.joint_vel[inside], motion.joint_vel[inside])
    assert np.allclose(out.root_lin_vel[inside], motion.root_lin_vel[inside])
    assert out.num_frames == motion.num_frames and out.fps == motion.fps


def test_no_jump_anywhere():
    """Frame-to-frame changes of the blended velocities stay within what the blend of smooth curves
    allows (smootherstep: max|w'| = 15/8, max|w''| = 10/sqrt(3)); a jump of the velocity at the
    lead-in's end would be the motion's speed (1.7 m/s) in one frame. The joints blend positions,
    |q''| <= max|w''| / D^2 |q - rest| + 2 max|w'| / D |q'| + |q''_motion|; the root's horizontal
    velocity is scaled, |a| <= max|w'| / D |v| + |a_motion| (blending its position would ask ~3x that)."""
    motion = moving_motion()
    out = led_in(motion, REST)
    d = REST.duration_s
    own_q = np.abs(np.diff(motion.joint_vel, axis=0)).max() * FPS
    q_bound = (10 / np.sqrt(3) / d ** 2 * np.abs(motion.joint_pos - REST.rest_joint_pos).max()
               + 2 * 15 / 8 / d * np.abs(motion.joint_vel).max() + own_q)
    assert np.abs(np.diff(out.joint_vel, axis=0)).max() * FPS < 1.05 * q_bound
    speed = np.linalg.norm(motion.root_lin_vel[:, :2], axis=1).max()
    own = np.linalg.norm(np.diff(motion.root_lin_vel[:, :2], axis=0), axis=1).max() * FPS
    accel = np.linalg.norm(np.diff(out.root_lin_vel[:, :2], axis=0), axis=1).max() * FPS
    assert accel < 1.05 * (15 / 8 / d * speed + own) and 15 / 8 / d * speed > 3.0
    assert np.all(np.sum(out.root_quat[1:] * out.root_quat[:-1], axis=1) > 0.99)


@settings(max_examples=40, deadline=None)
@given(phase=st.floats(0, 6.3), yaw=st.floats(-3.1, 3.1), duration=st.floats(0.1, 2.5))
def test_the_blend_never_leaves_the_span_of_rest_and_motion(phase, yaw, duration):
    """Joint angles between the rest pose's and the motion's at every frame (so inside any joint
    limits both respect), quaternions unit."""
    motion = moving_motion(phase=phase, yaw=yaw)
    out = led_in(motion, LeadIn(duration, REST.rest_joint_pos, REST.standing_height))
    low = np.minimum(motion.joint_pos, REST.rest_joint_pos) - 1e-12
    high = np.maximum(motion.joint_pos, REST.rest_joint_pos) + 1e-12
    assert np.all((out.joint_pos >= low) & (out.joint_pos <= high))
    assert np.allclose(np.linalg.norm(out.root_quat, axis=1), 1.0)


def test_no_lead_in_is_the_motion_itself():
    motion = moving_motion()
    assert led_in(motion, LeadIn(0.0, REST.rest_joint_pos, 0.79)) is motion


@pytest.mark.parametrize("lead_in,message", [
    (LeadIn(3.0, REST.rest_joint_pos, 0.79), "3 s is not shorter than the motion (3 s)"),
    (LeadIn(1.0, np.zeros(N + 1), 0.79), "rest pose of (7,) joint angles; the motion has 6 joints"),
])
def test_a_lead_in_that_does_not_fit_says_why(lead_in, message):
    with pytest.raises(MotionFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        led_in(moving_motion(), lead_in)


@pytest.mark.parametrize("duration", [-0.5, float("nan"), float("inf")])
def test_a_duration_that_is_not_one_is_refused(duration):
    with pytest.raises(MotionFileError, match="expected a finite duration >= 0 s"):
        LeadIn(duration, REST.rest_joint_pos, 0.79)
