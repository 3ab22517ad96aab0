"""Training clips: resampling (slerp, finite differences), forward and leg inverse kinematics
against MuJoCo, joint mapping by name, torch export, `load_clip` on files."""
import dataclasses
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from bcg.motion import LAFAN1_FPS, JointLimitWarning, MotionFileError, ReferenceMotion, save_motion_csv
from bcg.motion.resample import resample
from bcg.robot import RobotDescription
from bcg.rotations import heading, projected_gravity, turned_about_vertical
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import load_clip
from bcg_train.motion.resample import ResampleConfig, angular_velocity, build_clip

SHARED = Path(__file__).resolve().parents[3] / "shared" / "robots" / "unitree_g1"


@pytest.fixture(scope="module")
def kinematics():
    return RobotKinematics(RobotDescription.load(SHARED / "scene_29dof.xml"))


def _yaw_quat(yaw):
    yaw = np.asarray(yaw, float)
    return np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], -1)


def _motion(robot, t, joint_pos, root_pos=None, root_quat=None, names=None) -> ReferenceMotion:
    frames = len(t)
    root_pos = np.tile([0.0, 0.0, 0.75], (frames, 1)) if root_pos is None else root_pos
    root_quat = np.tile([1.0, 0, 0, 0], (frames, 1)) if root_quat is None else root_quat
    return ReferenceMotion(1 / (t[1] - t[0]), tuple(names or robot.joint_names), joint_pos, np.zeros_like(joint_pos),
                           root_pos, root_quat)


def _random_poses(robot, frames, seed=0):
    rng = np.random.default_rng(seed)
    q = robot.q_lower + (robot.q_upper - robot.q_lower) * rng.uniform(0.2, 0.8, (frames, robot.num_joints))
    quat = rng.normal(size=(frames, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    return rng.normal(0, 0.5, (frames, 3)) + [0, 0, 0.8], quat, q


def test_forward_kinematics_matches_mujoco(kinematics):
    robot = kinematics.robot
    root_pos, root_quat, q = _random_poses(robot, 5)
    body_pos, body_quat = kinematics.forward(root_pos, root_quat, q)
    m = mujoco.MjModel.from_xml_path(str(SHARED / "scene_29dof.xml"))
    d = mujoco.MjData(m)
    assert kinematics.body_names[0] == "pelvis" and len(kinematics.body_names) == m.nbody - 1 == 30
    for i in range(5):
        d.qpos[:3], d.qpos[3:7], d.qpos[7:] = root_pos[i], root_quat[i], q[i]
        mujoco.mj_forward(m, d)
        for b, name in enumerate(kinematics.body_names):
            np.testing.assert_allclose(body_pos[i, b], d.body(name).xpos, atol=1e-12)
            np.testing.assert_allclose(body_quat[i, b], d.body(name).xquat, atol=1e-12)


def test_leg_ik_recovers_a_foot_pose(kinematics):
    robot = kinematics.robot
    root_pos, root_quat, q = np.array([0.1, 0.0, 0.72]), _yaw_quat(0.3), robot.default_q.copy()
    target = q.copy()
    legs = np.concatenate(list(kinematics.leg_columns.values()))
    target[legs] += np.array([-0.4, 0.1, 0.2, 0.6, -0.3, 0.1] * 2)
    d = kinematics.set_pose(root_pos, root_quat, target)
    feet = {side: (d.xpos[b].copy(), d.xquat[b].copy()) for side, b in kinematics.foot_bodies.items()}
    for side, (pos, quat) in feet.items():
        q = kinematics.solve_leg(side, root_pos, root_quat, q, pos, quat)
    np.testing.assert_allclose(q, target, atol=1e-7)
    assert [robot.joint_names[c] for c in kinematics.leg_columns["left"]] == list(robot.joint_names[:6])
    assert kinematics.sole_height == pytest.approx(0.035)   # spheres r 5 mm, 30 mm below the ankle-roll frame


def test_slerp_and_angular_velocity_of_a_steady_turn(kinematics):
    robot = kinematics.robot
    rate, omega = 50.0, 1.3                      # rad/s about z
    t = np.arange(31) / LAFAN1_FPS
    motion = _motion(robot, t, np.tile(robot.default_q, (31, 1)), root_quat=_yaw_quat(omega * t))
    clip = build_clip(motion, kinematics, ResampleConfig(rate_hz=rate))
    times = np.arange(clip.num_frames) / rate
    assert clip.num_frames == 51 and clip.fps == rate
    np.testing.assert_allclose(clip.root_quat, _yaw_quat(omega * times), atol=1e-12)
    np.testing.assert_allclose(clip.root_ang_vel, np.tile([0, 0, omega], (51, 1)), atol=1e-9)
    np.testing.assert_allclose(clip.root_ang_vel_body, np.tile([0, 0, omega], (51, 1)), atol=1e-9)
    # about a tilted axis, world and body frames differ
    tilt = np.array([np.cos(0.2), np.sin(0.2), 0, 0])          # 0.4 rad about x
    quat = np.array([_quat_mul(tilt, q) for q in _yaw_quat(omega * times)])
    world = angular_velocity(quat, 1 / rate)
    np.testing.assert_allclose(world, np.tile([0, -np.sin(0.4) * omega, np.cos(0.4) * omega], (51, 1)), atol=1e-9)


def _quat_mul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


@pytest.mark.parametrize("interpolation", ["cubic", "linear"])
def test_finite_difference_velocities_of_a_polynomial(kinematics, interpolation):
    robot = kinematics.robot
    t = np.arange(46) / LAFAN1_FPS                                 # 1.5 s
    a, b, c = robot.default_q, np.linspace(-0.08, 0.08, 29), -0.05   # stays inside the joint limits
    q = a + np.outer(t, b) + c * t[:, None] ** 2
    root = np.column_stack([0.5 * t, 0.1 * t ** 2, 0.75 - 0.2 * t ** 2])
    clip = build_clip(_motion(robot, t, q, root_pos=root), kinematics, ResampleConfig(interpolation=interpolation))
    times = np.arange(clip.num_frames) / 50.0
    assert clip.num_frames == 76
    if interpolation == "cubic":                                  # a cubic spline is exact on quadratics
        np.testing.assert_allclose(clip.joint_pos, a + np.outer(times, b) + c * times[:, None] ** 2, atol=1e-12)
        np.testing.assert_allclose(clip.joint_vel, b + 2 * c * times[:, None], atol=1e-10)
        np.testing.assert_allclose(clip.root_lin_vel, np.column_stack([0.5 + 0 * times, 0.2 * times, -0.4 * times]),
                                   atol=1e-10)
    else:                                                         # chords of the parabola: within h^2 c / 4
        np.testing.assert_allclose(clip.joint_vel, b + 2 * c * times[:, None], atol=abs(c) * (1 / 30) * 1.01)


def test_clip_maps_joints_by_name_and_moves_to_torch(kinematics):
    robot = kinematics.robot
    t = np.arange(10) / LAFAN1_FPS
    q = np.tile(robot.default_q, (10, 1)) + np.linspace(0, 0.1, 10)[:, None]
    reversed_motion = _motion(robot, t, q[:, ::-1], names=robot.joint_names[::-1])
    clip = build_clip(reversed_motion, kinematics, ResampleConfig(rate_hz=LAFAN1_FPS))
    np.testing.assert_allclose(clip.joint_pos, q, atol=1e-12)
    assert clip.joint_names == robot.joint_names and clip.body_pos.shape == (10, 30, 3)
    q_gen, qd_gen = clip.generalized()
    assert q_gen.shape == (10, 36) and qd_gen.shape == (10, 35)
    np.testing.assert_allclose(q_gen[:, 7:], q)
    np.testing.assert_allclose(qd_gen[:, 6:], clip.joint_vel)
    tensors = clip.to_torch(dtype=torch.float64)
    assert tensors.body_quat.shape == (10, 30, 4) and tensors.body_quat.dtype == torch.float64
    assert torch.equal(tensors.joint_pos, torch.as_tensor(q_gen[:, 7:]))
    assert tensors.frame_index(torch.tensor([0.0, 0.049, 0.051, 99.0])).tolist() == [0, 1, 2, 9]
    assert clip.to_torch().root_pos.dtype == torch.float32


def test_rest_state_stands_still_in_the_default_pose_where_the_frame_is_facing_its_way(kinematics):
    robot = kinematics.robot
    t = np.arange(10) / LAFAN1_FPS
    clip = build_clip(_motion(robot, t, np.tile(robot.q_lower * 0.5, (10, 1))), kinematics,
                      ResampleConfig(rate_hz=LAFAN1_FPS))
    yaw, roll = 2.5, 0.3                                      # a frame facing 143 deg, rolled
    tilted = turned_about_vertical(np.array([np.cos(roll / 2), np.sin(roll / 2), 0.0, 0.0]), yaw)
    clip = dataclasses.replace(clip, root_quat=np.tile(tilted, (10, 1)),
                               root_pos=np.tile([1.0, -2.0, 0.5], (10, 1)))
    q, qd = clip.rest_state(4, robot.default_q, robot.standing_height)
    assert q.shape == (7 + robot.num_joints,) and qd.shape == (6 + robot.num_joints,) and not qd.any()
    np.testing.assert_allclose(q[:3], [1.0, -2.0, robot.standing_height])
    assert heading(q[3:7]) == pytest.approx(yaw)
    np.testing.assert_allclose(projected_gravity(q[3:7]), [0, 0, -1], atol=1e-12)            # upright
    np.testing.assert_array_equal(q[7:], robot.default_q)


def test_resample_covers_the_motion(kinematics):
    robot = kinematics.robot
    t = np.arange(31) / LAFAN1_FPS                                 # exactly 1 s
    times, root_pos, root_quat, joint_pos = resample(_motion(robot, t, np.tile(robot.default_q, (31, 1))), 50.0)
    np.testing.assert_allclose(times, np.arange(51) / 50)
    assert root_pos.shape == (51, 3) and root_quat.shape == (51, 4) and joint_pos.shape == (51, 29)
    with pytest.raises(ValueError, match="interpolation: one of"):
        ResampleConfig(interpolation="nearest")


def test_load_clip_from_a_file_checks_limits(kinematics, tmp_path):
    robot = kinematics.robot
    t = np.arange(20) / LAFAN1_FPS
    q = np.tile(robot.default_q, (20, 1))
    q[5, 3] = robot.q_upper[3] + 0.05
    path = save_motion_csv(_motion(robot, t, q), tmp_path / "m.csv")
    with pytest.raises(MotionFileError, match=r"left_knee_joint above the upper limit by up to 0.0500 rad at line 6"):
        load_clip(path, kinematics)
    with pytest.warns(JointLimitWarning):
        clip = load_clip(path, kinematics, clip_to_limits=True)
    assert clip.name == str(path) and clip.num_frames == 32 and clip.joint_pos.max(axis=0)[3] <= robot.q_upper[3]


def test_load_clip_by_builtin_name(kinematics):
    clip = load_clip("synthetic_jump", kinematics, ResampleConfig(rate_hz=25.0), builtin_duration_s=3.0)
    assert clip.name == "synthetic_jump" and clip.fps == 25.0 and clip.num_frames == 76
    assert clip.root_pos[:, 2].max() > clip.root_pos[0, 2] + 0.25          # it jumps
    with pytest.raises(MotionFileError, match="hop: does not exist"):
        load_clip("hop", kinematics)                                      # neither built in nor named: a path
