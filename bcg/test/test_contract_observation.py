"""The observation spec: term values, layout, numpy/torch agreement, reference sampling."""
import numpy as np
import pytest

from bcg.contract import ObservationInputs, ObservationSpecError, robot_state_spec, tracking_spec
from bcg.motion import ReferenceFrames, load_motion


def quat_about_x(angle):
    return np.array([np.cos(angle / 2), np.sin(angle / 2), 0.0, 0.0])


def inputs(n=4, quat=(1.0, 0, 0, 0), frames=3, batch=()):
    rng = np.random.default_rng(1)
    shape = batch + (n,)
    ref = ReferenceFrames(rng.normal(size=batch + (frames, n)), rng.normal(size=batch + (frames, n)),
                          rng.normal(size=batch + (frames, 3)),
                          np.broadcast_to(quat_about_x(0.3), batch + (frames, 4)).copy(),
                          rng.normal(size=batch + (frames, 3)))
    return ObservationInputs(np.broadcast_to(np.asarray(quat, float), batch + (4,)).copy(),
                             rng.normal(size=batch + (3,)), rng.normal(size=shape), rng.normal(size=shape),
                             rng.normal(size=shape), np.full(n, 0.5), ref)


def test_layout_and_scales():
    inp = inputs()
    obs = robot_state_spec(4, ang_vel_scale=0.25, joint_vel_scale=0.05).build(inp)
    assert obs.shape == (3 + 3 + 4 + 4 + 4,) and obs.dtype == np.float32
    np.testing.assert_allclose(obs[:3], 0.25 * inp.base_ang_vel, rtol=1e-6)
    np.testing.assert_allclose(obs[3:6], [0, 0, -1])
    np.testing.assert_allclose(obs[6:10], inp.joint_pos - 0.5, rtol=1e-6)
    np.testing.assert_allclose(obs[10:14], 0.05 * inp.joint_vel, rtol=1e-5)


def test_projected_gravity_follows_the_base():
    spec = robot_state_spec(4)
    tilted = spec.build(inputs(quat=quat_about_x(np.pi / 2)))[3:6]
    np.testing.assert_allclose(tilted, [0, -1, 0], atol=1e-6)
    upside_down = spec.build(inputs(quat=quat_about_x(np.pi)))[3:6]
    np.testing.assert_allclose(upside_down, [0, 0, 1], atol=1e-6)


def test_reference_terms_relative_rotation_and_size():
    spec = tracking_spec(4, frames=(1, 2, 3))
    obs = spec.build(inputs(quat=quat_about_x(0.3)))
    assert obs.shape == (spec.size,) and spec.size == 18 + 3 * (4 + 4 + 1 + 6)
    np.testing.assert_allclose(obs[-6:], [1, 0, 0, 0, 1, 0], atol=1e-6)   # same orientation as the base


def test_reference_root_velocity_is_in_the_reference_frame_whatever_the_base():
    spec = tracking_spec(4, frames=(1, 2, 3), root_velocity=True)
    assert spec.size == 18 + 3 * (4 + 4 + 1 + 6 + 3) and spec.terms[-1].name == "ref_root_lin_vel"
    inp = inputs(quat=quat_about_x(1.0))              # the reference is turned 0.3 rad about x
    ref = inp.reference
    velocity = np.broadcast_to([0.2, 1.0, 0.0], ref.root_pos.shape).copy()
    inp = ObservationInputs(*(getattr(inp, f) for f in ("base_quat", "base_ang_vel", "joint_pos", "joint_vel",
                                                        "last_action", "default_joint_pos")),
                            ReferenceFrames(ref.joint_pos, ref.joint_vel, ref.root_pos, ref.root_quat, velocity))
    expected = [0.2, np.cos(0.3), -np.sin(0.3)] * 3
    np.testing.assert_allclose(spec.build(inp)[-9:], expected, atol=1e-6)
    assert tracking_spec(4).size == spec.size - 9


def test_torch_batch_matches_numpy():
    torch = pytest.importorskip("torch")
    spec = tracking_spec(4, root_velocity=True)
    inp = inputs(batch=(5,))
    as_torch = ObservationInputs(*(torch.tensor(getattr(inp, f)) for f in
                                   ("base_quat", "base_ang_vel", "joint_pos", "joint_vel", "last_action",
                                    "default_joint_pos")),
                                 ReferenceFrames(*(torch.tensor(getattr(inp.reference, f)) for f in
                                                   ("joint_pos", "joint_vel", "root_pos", "root_quat",
                                                    "root_lin_vel"))))
    np.testing.assert_allclose(spec.build(as_torch).numpy(), spec.build(inp), rtol=1e-5, atol=1e-6)


def test_missing_reference_and_bad_specs_are_errors():
    spec = tracking_spec(4)
    inp = inputs()
    with pytest.raises(ObservationSpecError, match="no motion"):
        spec.build(ObservationInputs(inp.base_quat, inp.base_ang_vel, inp.joint_pos, inp.joint_vel,
                                     inp.last_action, inp.default_joint_pos))
    with pytest.raises(ObservationSpecError, match="frames .* differ"):
        type(spec).from_json([{"name": "ref_joint_pos", "size": 4, "frames": [1]},
                              {"name": "ref_joint_vel", "size": 8, "frames": [1, 2]}], 4)


def test_lafan_csv_motion_maps_joints_by_name(tmp_path):
    from bcg.robot import SDK_JOINT_NAMES
    rows = np.zeros((4, 36))
    rows[:, 6] = 1.0                        # quaternion w (x y z w order in the file)
    rows[:, 2] = 0.8
    rows[:, 0] = np.arange(4) ** 2 * 0.01    # root x = 9 t^2 m: 0 m/s at frame 0, 0.6 m/s at frame 1
    rows[:, 7 + SDK_JOINT_NAMES.index("left_knee_joint")] = np.arange(4) * 0.3
    np.savetxt(tmp_path / "m.csv", rows, delimiter=",")
    motion = load_motion(tmp_path / "m.csv")
    cols = motion.joint_index(["left_knee_joint", "left_hip_pitch_joint"])
    ref = motion.sample(np.array([1 / 60, 10.0]), cols)   # half-way between frames 0 and 1; clamped at the end
    np.testing.assert_allclose(ref.joint_pos[:, 0], [0.15, 0.9])
    np.testing.assert_allclose(ref.joint_vel[0, 0], 0.3 * 30)
    np.testing.assert_allclose(ref.root_quat[0], [1, 0, 0, 0])
    np.testing.assert_allclose(ref.root_lin_vel[0], [0.3, 0, 0], atol=1e-12)  # second-order ends: exact here


def random_unit_quats(rng, shape):
    q = rng.normal(size=shape + (4,))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def test_rotation_terms_match_mujoco():
    """projected_gravity = R_base^T (0, 0, -1) and ref_root_rot = the first two columns of
    R_base^T R_ref, with the rotation matrices from MuJoCo's own mju_quat2Mat."""
    mujoco = pytest.importorskip("mujoco")
    rng = np.random.default_rng(3)
    spec = tracking_spec(4, frames=(1, 2, 3))
    for _ in range(10):
        inp = inputs()
        base, refs = random_unit_quats(rng, ()), random_unit_quats(rng, (3,))
        inp = ObservationInputs(base, *(getattr(inp, f) for f in ("base_ang_vel", "joint_pos", "joint_vel",
                                                                   "last_action", "default_joint_pos")),
                                ReferenceFrames(inp.reference.joint_pos, inp.reference.joint_vel,
                                                inp.reference.root_pos, refs, inp.reference.root_lin_vel))
        obs = spec.build(inp)

        def matrix(q):
            m = np.zeros(9)
            mujoco.mju_quat2Mat(m, q)
            return m.reshape(3, 3)
        rb = matrix(base)
        np.testing.assert_allclose(obs[3:6], rb.T @ [0, 0, -1], atol=1e-6)
        expected = [(rb.T @ matrix(q))[:, :2].T.ravel() for q in refs]
        np.testing.assert_allclose(obs[-18:], np.concatenate(expected), atol=1e-6)


@pytest.mark.parametrize("batch", [(), (5,)])
def test_prepared_reference_builds_the_same_observation(batch):
    """The node prepares the reference terms before the step (`prepare`); `build` with them gives
    exactly what training's one-call `build` gives."""
    spec = tracking_spec(4)
    inp = inputs(quat=quat_about_x(0.7), batch=batch)
    prepared = spec.prepare(inp.reference, inp.default_joint_pos)
    without_reference = ObservationInputs(inp.base_quat, inp.base_ang_vel, inp.joint_pos, inp.joint_vel,
                                          inp.last_action, inp.default_joint_pos)
    np.testing.assert_array_equal(spec.build(without_reference, prepared), spec.build(inp))
    assert [p is None for p in prepared] == [not t.frames for t in spec.terms]


def test_tilting_about_a_horizontal_axis_matches_mujoco_and_keeps_the_heading():
    """tilted_about_horizontal(q, a, t) = R_axis(t) R(q) with the axis (cos a, sin a, 0), checked
    against MuJoCo's mju_mulQuat / mju_axisAngle2Quat, on numpy and torch; an upright frame ends t
    from upright."""
    mujoco = pytest.importorskip("mujoco")
    torch = pytest.importorskip("torch")
    from bcg.rotations import heading, projected_gravity, tilted_about_horizontal, turned_about_vertical
    rng = np.random.default_rng(4)
    q, axis, tilt = random_unit_quats(rng, (6,)), rng.uniform(-np.pi, np.pi, 6), rng.uniform(0, 0.5, 6)
    got = tilted_about_horizontal(q, axis, tilt)
    for i in range(6):
        r, expected = np.zeros(4), np.zeros(4)
        mujoco.mju_axisAngle2Quat(r, [np.cos(axis[i]), np.sin(axis[i]), 0.0], tilt[i])
        mujoco.mju_mulQuat(expected, r, q[i])
        np.testing.assert_allclose(got[i], expected, atol=1e-12)
    np.testing.assert_allclose(tilted_about_horizontal(torch.as_tensor(q), torch.as_tensor(axis),
                                                       torch.as_tensor(tilt)).numpy(), got, atol=1e-12)
    upright = turned_about_vertical(np.array([1.0, 0, 0, 0]), 2.0)
    leaning = tilted_about_horizontal(upright, 0.7, 0.2)
    assert np.degrees(np.arccos(-projected_gravity(leaning)[2])) == pytest.approx(np.degrees(0.2))
    assert heading(leaning) == pytest.approx(2.0, abs=0.02)
