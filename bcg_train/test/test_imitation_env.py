"""The G1 imitation environment on the differentiable simulator: reference state initialisation,
differentiable observations / features / rewards, terminations and time-outs, the plain no-grad path,
exact state round trips and the exported contract."""
import dataclasses

import numpy as np
import pytest
import torch

from bcg.config_check import ConfigError
from bcg.contract import PolicyContract
from bcg.motion import MotionDirNotFoundError
from bcg_train.algo.episodes import RolloutStats
from bcg_train.cli import build_env
from bcg_train.diffsim import BundleConfig, SimConfig
from bcg_train.env_api import DiffEnv
from bcg_train.imitation.config import ImitationEnvConfig
from bcg_train.imitation.env import G1ImitationEnv
from bcg_train.train_config import TrainConfig, apply_overrides

N = 3


def make(bundle=False, motion="synthetic_jump", **changes):
    cfg = dataclasses.replace(ImitationEnvConfig(sim=SimConfig(bundle=BundleConfig(enabled=bundle, branches=2))),
                              **changes)
    return G1ImitationEnv(cfg, motion, N, "cpu", seed=5)


@pytest.fixture(scope="module")
def env():
    return make()


def test_is_a_diff_env_with_consistent_sizes(env):
    assert isinstance(env, DiffEnv)
    obs = env.reset()
    assert obs.shape == (N, env.obs_dim) and obs.dtype == torch.float32
    assert env.obs_dim == env.spec.size and env.act_dim == 29
    contract = env.policy_contract()
    assert isinstance(contract, PolicyContract) and contract.observation.size == env.obs_dim
    assert contract.contact_stiffness == env.cfg.sim.kappa and contract.motion == "synthetic_jump"
    assert contract.simulator["substeps"] == env.cfg.sim.substeps
    assert SimConfig.from_contract(contract.contact_stiffness, contract.simulator) == \
        dataclasses.replace(env.cfg.sim, bundle=SimConfig().bundle)     # evaluation runs the same physics
    step = env.step(torch.zeros(N, env.act_dim))
    assert step.add_sim.shape == step.add_ref.shape == (N, env.add_dim)


def test_reset_starts_on_the_reference(env):
    env.reset()
    frames = env.frame
    np.testing.assert_allclose(env.q.numpy(), env._ref_q[frames].numpy())
    np.testing.assert_allclose(env.qd.numpy(), env._ref_qd[frames].numpy())
    pose = env._pose(env.q, env.qd)
    ref = env._reference_pose(frames)
    np.testing.assert_allclose(pose.body_pos.numpy(), ref.body_pos.numpy(), atol=1e-9)
    hinge = env.q[:, env._jq].numpy()
    np.testing.assert_allclose(hinge, env.ref.joint_pos[frames].numpy())


def test_window_is_differentiable_and_matches_finite_differences(env):
    """d(sum of features, observations and rewards over 2 steps) / d(actions) against central FD."""
    env.reset()
    state = env.state_dict()
    gen = torch.Generator().manual_seed(0)
    a0 = 0.2 * torch.randn(2, N, env.act_dim, generator=gen, dtype=torch.float64)
    w_f = torch.randn(N, env.add_dim, generator=gen, dtype=torch.float64)
    w_o = torch.randn(N, env.obs_dim, generator=gen, dtype=torch.float64)

    def loss(a):
        env.load_state_dict(state)
        total = 0.0
        for t in range(2):
            s = env.step(a[t])
            total = (total + (w_f * s.add_sim).sum() + (w_o * s.obs_before_reset).sum()
                     + s.reward_terms["action_rate"].sum())
        return total

    a = a0.clone().requires_grad_(True)
    loss(a).backward()
    env.cut_graph()                     # after the backward pass: a cut tape is refused
    assert torch.isfinite(a.grad).all() and a.grad.abs().sum() > 0
    u = torch.randn(a0.shape, generator=gen, dtype=torch.float64)
    u /= u.norm()
    eps = 1e-4
    with torch.no_grad():
        fd = (loss(a0 + eps * u) - loss(a0 - eps * u)) / (2 * eps)
    assert abs((a.grad * u).sum() - fd) < 2e-3 * abs(fd), ((a.grad * u).sum().item(), fd.item())


def test_segments_reuse_the_simulator_buffers(env):
    """Memory stays bounded over a run: each segment's taped substeps reuse the previous segment's buffers."""
    env.reset()
    for _ in range(3):
        a = torch.full((N, env.act_dim), 0.1, requires_grad=True)
        loss = sum(env.step(a).add_sim.sum() for _ in range(4))
        loss.backward()
        env.cut_graph()
    assert len(env.sim.segment._taped) == 4 * env.cfg.sim.substeps


def test_no_grad_steps_take_the_plain_simulator_with_the_same_physics(env):
    env.reset()
    state = env.state_dict()
    a = 0.3 * torch.ones(N, env.act_dim)
    taped = env.step(a)
    q_taped = env.q.detach().clone()
    env.load_state_dict(state)
    with torch.no_grad():
        plain = env.step(a)
    np.testing.assert_array_equal(env.q.numpy(), q_taped.numpy())
    np.testing.assert_array_equal(plain.obs.numpy(), taped.obs.detach().numpy())


def test_failure_resets_to_the_reference_and_keeps_the_final_observation():
    env = make(termination_height=2.0)          # every state fails, by falling
    env.reset()
    step = env.step(torch.zeros(N, env.act_dim))
    assert step.terminated.all() and not step.truncated.any() and step.fell.all()
    assert (env.steps == 0).all()
    np.testing.assert_allclose(env.q.numpy(), env._ref_q[env.frame].numpy())
    assert not torch.equal(step.obs, step.obs_before_reset)


def test_drifting_from_the_reference_fails_without_falling_and_the_log_tells_them_apart():
    env = make(termination_body_error=1e-6)     # every state has drifted, none fell
    env.reset()
    step = env.step(torch.zeros(N, env.act_dim))
    assert step.terminated.all() and not step.fell.any()
    stats = RolloutStats(N, env.device)
    stats.record({"r": torch.zeros(2, N)}, torch.stack([step.terminated, step.terminated]),
                 torch.zeros(2, N, dtype=torch.bool), torch.stack([step.fell, torch.ones(N, dtype=torch.bool)]))
    out = stats.pop()
    ratio = {k: float(out[k].numerator / out[k].denominator) for k in ("episode/failed_fraction",
                                                                       "episode/fell_fraction")}
    assert ratio == {"episode/failed_fraction": 1.0, "episode/fell_fraction": 0.5}


def test_a_horizontal_drift_fails_in_the_world_frame_only():
    """The same robots, 0.4 m off their reference sideways: a world-frame error of 0.4 m; with the
    root's horizontal drift removed, only what the step itself changed (mm)."""
    def first_step(frame):
        env = make(termination_body_error=0.3, termination_body_frame=frame)
        env.reset()
        env.q = env.q + torch.tensor([0.4, 0.0] + [0.0] * (env.q.shape[1] - 2), dtype=env.q.dtype)
        return env.step(torch.zeros(N, env.act_dim))
    assert first_step("world").terminated.all()
    assert not first_step("root_xy").terminated.any()
    with pytest.raises(ConfigError, match=r"^env\.termination_body_frame='pelvis': not one of the choices; "
                       r"expected one of 'world', 'root_xy'$"):
        make(termination_body_frame="pelvis")


def test_the_alive_reward_pays_each_step_that_does_not_fail():
    assert "alive" not in make().step(torch.zeros(N, 29)).reward_terms      # the paper's reward by default
    env = make(alive_reward=0.5, termination_body_error=0.3, termination_body_frame="world")
    env.reset()
    env.q = env.q + torch.tensor([0.4 * (i == 0) for i in range(env.q.shape[1])], dtype=env.q.dtype) * \
        torch.tensor([[1.0], [0.0], [0.0]], dtype=env.q.dtype)                 # the first robot has drifted
    step = env.step(torch.zeros(N, env.act_dim))
    assert step.terminated.tolist() == [True, False, False]
    assert step.reward_terms["alive"].tolist() == [0.0, 0.5, 0.5]


def test_the_root_velocity_reward_pays_for_moving_with_the_reference():
    """w exp(-|v_xy - v_ref_xy|^2 / sigma^2) of the state the step reached, differentiable in the actions."""
    assert "root_velocity" not in make().step(torch.zeros(N, 29)).reward_terms
    env = make(root_velocity_reward=2.0, root_velocity_sigma=0.5)
    env.reset()
    ref_vel = env._reference_pose(env.frame + 1).root_lin_vel
    actions = torch.zeros(N, env.act_dim, requires_grad=True)
    step = env.step(actions)
    after = env._pose(env.q, env.qd).root_lin_vel      # (no restart: the first step does not fail)
    lag = ((after[:, :2] - ref_vel[:, :2]) ** 2).sum(-1)
    np.testing.assert_allclose(step.reward_terms["root_velocity"].detach().numpy(),
                               (2.0 * torch.exp(-lag / 0.25)).detach().numpy(), rtol=1e-6)
    step.reward_terms["root_velocity"].sum().backward()
    assert actions.grad.abs().sum() > 0
    with pytest.raises(ConfigError, match=r"^env\.root_velocity_sigma=0\.0: too small; expected a number > 0$"):
        make(root_velocity_sigma=0.0)
    with pytest.raises(ConfigError, match=r"^env\.root_velocity_reward=-1\.0: too small; expected a number >= 0$"):
        make(root_velocity_reward=-1.0)


def test_the_leg_clearance_penalty_charges_legs_that_come_close_differentiably():
    """-w LegClearance.penalty of the bodies the step reached; off (no term) by default."""
    from bcg_train.imitation.leg_clearance import LegClearance
    assert "leg_clearance" not in make().step(torch.zeros(N, 29)).reward_terms
    env = make(leg_clearance_penalty=3.0, leg_clearance_margin_m=0.5)   # wide: the G1's legs are ~0.2 m apart
    env.reset()
    actions = torch.zeros(N, env.act_dim, requires_grad=True)
    step = env.step(actions)
    pose = env._pose(env.q, env.qd)                               # (no restart: the first step does not fail)
    expected = -3.0 * LegClearance(env.model.body_names, 0.5, env.feet()).penalty(pose.body_pos, pose.body_quat)
    assert all(r == pytest.approx(0.005, abs=0.002) for _, _, r in env.feet().values())   # the G1's foot spheres
    assert (expected < -3.0 * LegClearance(env.model.body_names, 0.5).penalty(pose.body_pos)).all()   # feet count
    assert (expected < 0).all()
    np.testing.assert_allclose(step.reward_terms["leg_clearance"].detach().numpy(), expected.detach().numpy(),
                               rtol=1e-6)
    step.reward_terms["leg_clearance"].sum().backward()
    assert actions.grad.abs().sum() > 0
    with pytest.raises(ConfigError, match=r"^env\.leg_clearance_margin_m=0\.0: too small; "):
        make(leg_clearance_margin_m=0.0)
    with pytest.raises(ConfigError, match=r"^env\.leg_clearance_penalty=-1\.0: too small; "):
        make(leg_clearance_penalty=-1.0)


def test_rest_starts_stand_still_in_the_default_pose_at_the_first_frame_facing_the_reference():
    """As the policy node starts the robot: a fraction of the episodes; the rest on the reference."""
    env = make(rest_start_fraction=1.0)
    env.reset()
    assert env.frame.tolist() == [0] * N and not env.qd.any()
    np.testing.assert_allclose(env.q[:, env._jq].numpy(), np.tile(env.robot.default_q, (N, 1)))
    np.testing.assert_allclose(env.q[:, 2].numpy(), env.robot.standing_height)
    np.testing.assert_allclose(env.q[:, :2].numpy(), env._ref_q[[0] * N, :2].numpy())
    mixed = make(rest_start_fraction=0.5)
    starts = []
    for _ in range(20):
        mixed.reset()
        starts += (mixed.qd.abs().sum(dim=1) == 0).tolist()
    assert 0 < sum(starts) < len(starts)


def test_a_lead_in_makes_the_reference_begin_at_the_rest_start_and_the_contract_carries_it():
    """With `lead_in_s` the reference's first frame is the start from rest (as the node starts the
    robot), its later frames the clip's own; the exported contract asks the node for the same. On the
    dance segment, which opens mid-move (the built-in motions begin at rest)."""
    try:
        env, led = make(motion="dance"), make(motion="dance", lead_in_s=0.5)
    except MotionDirNotFoundError as e:
        pytest.skip(str(e))
    np.testing.assert_allclose(led._ref_q[0].numpy(), led._rest_q.numpy(), atol=1e-12)
    assert np.abs(led._ref_qd[0].numpy()).max() < 0.1 * np.abs(env._ref_qd[0].numpy()).max()   # near still
    later = slice(int(0.5 / led.cfg.control_period_s) + 2, None)
    np.testing.assert_allclose(led._ref_qd[later].numpy(), env._ref_qd[later].numpy(), atol=1e-9)
    assert led.policy_contract().motion_lead_in_s == 0.5 and env.policy_contract().motion_lead_in_s == 0.0
    with pytest.raises(ConfigError, match=r"^env\.lead_in_s=-1\.0: too small; "):
        make(lead_in_s=-1.0)


def test_rest_starts_lean_tip_and_sag_within_their_settings_and_draw_nothing_when_still():
    """The perturbed starts from rest: each root tilted by at most rest_start_tilt_deg about a
    horizontal axis (heading kept), tipping at most rest_start_tip_rate about a horizontal axis with
    the root moving as a pivot about the feet, joints off the default pose; all of them differ.
    Unperturbed, the episodes start exactly as before (no draw)."""
    from bcg.rotations import heading, projected_gravity, quat_rotate_inverse
    env = make(rest_start_fraction=1.0, rest_start_tilt_deg=5.0, rest_start_tip_rate=0.4,
               rest_start_joint_noise_rad=0.03)
    env.reset()
    q, qd = env.q.numpy(), env.qd.numpy()
    tilt = np.degrees(np.arccos(-projected_gravity(q[:, 3:7])[:, 2]))
    assert (tilt <= 5.0 + 1e-9).all() and tilt.max() > 1.0 and len(set(tilt.round(6))) == N
    np.testing.assert_allclose(heading(q[:, 3:7]), heading(env._rest_q[3:7].numpy()), atol=np.radians(0.2))
    omega_world = np.stack([quat_rotate_inverse(np.array([r[0], -r[1], -r[2], -r[3]]), w)
                            for r, w in zip(q[:, 3:7], qd[:, 3:6])])      # root frame -> world
    rate = np.linalg.norm(omega_world, axis=1)
    assert (rate <= 0.4 + 1e-9).all() and rate.max() > 0.05 and np.abs(omega_world[:, 2]).max() < 1e-12
    h = env.robot.standing_height
    pivot = np.stack([omega_world[:, 1] * h, -omega_world[:, 0] * h, np.zeros(N)], 1)     # omega x (0, 0, h)
    np.testing.assert_allclose(qd[:, :3], pivot, atol=1e-12)
    sag = q[:, env._jq.numpy()] - env.robot.default_q
    assert 0.01 < sag.std() < 0.05 and not qd[:, env._jv.numpy()].any()
    still, before = make(rest_start_fraction=0.5), make(rest_start_fraction=0.5, rest_start_tilt_deg=0.0)
    for e in (still, before):
        e.reset()
        e.step(torch.zeros(N, e.act_dim))
    assert torch.equal(still.q, before.q) and torch.equal(still.frame, before.frame)


def test_time_limit_truncates_without_failure():
    env = make(episode_length_s=0.04)           # two control steps
    env.reset()
    first = env.step(torch.zeros(N, env.act_dim))
    second = env.step(torch.zeros(N, env.act_dim))
    assert not first.truncated.any() and second.truncated.all() and not second.terminated.any()


def test_state_round_trip_continues_bit_exactly_with_open_bundles():
    """Saved while bundles are open (the robots dropped 10 cm onto the floor)."""
    env = make(bundle=True, termination_body_error=100.0)
    env.reset()
    env.q = torch.as_tensor(np.tile(env.model.default_qpos(0.857), (N, 1)))
    env.qd = torch.zeros_like(env.qd)
    env.qd[:, 2] = -1.2
    actions = [0.1 * torch.sin(torch.arange(N * 29, dtype=torch.float32).reshape(N, 29) + t) for t in range(8)]
    for t in range(4):
        env.step(actions[t])
        env.cut_graph()
    saved = env.state_dict()
    assert len(saved["simulator"]["bundle_env"]) > 0
    continued = [env.step(a).obs.detach() for a in actions[4:]]
    resumed_env = make(bundle=True, termination_body_error=100.0)
    resumed_env.load_state_dict(saved)
    resumed = [resumed_env.step(a).obs.detach() for a in actions[4:]]
    for x, y in zip(continued, resumed):
        assert torch.equal(x, y)


def test_build_env_follows_the_preset():
    preset = apply_overrides(TrainConfig(), {"shac": {"num_envs": 2, "num_envs_without_bundle": 4},
                                             "env": {"sim": {"kappa": 100.0, "bundle": {"enabled": False}},
                                                     "episode_length_s": 2.0}})
    env = build_env(preset, "synthetic_run", "cpu")
    assert env.num_envs == 4 and env.cfg.sim.kappa == 100.0 and not env.sim.bundler
    preset = apply_overrides(preset, {"env": {"sim": {"kappa": 1000.0, "bundle": {"enabled": True}}}})
    env = build_env(preset, "synthetic_run", "cpu")
    assert env.num_envs == 2 and env.cfg.sim.kappa == 1000.0 and env.sim.bundler and not env.sim_plain.bundler
    assert env.sim.model is env.sim_plain.model          # one Model, two simulators


def test_bad_env_settings_name_the_key():
    with pytest.raises(ConfigError, match=r"^env\.sim\.kappa=-1\.0: too small; expected a number > 0$"):
        apply_overrides(TrainConfig(), {"env": {"sim": {"kappa": -1.0}}}).validate()
    with pytest.raises(ConfigError, match=r"^env\.sim\.bundle\.branches=0: too small; expected an integer >= 1$"):
        apply_overrides(TrainConfig(), {"env": {"sim": {"bundle": {"branches": 0}}}}).validate()
    with pytest.raises(ConfigError, match=r"^env\.sim\.limit_stifness=1\.0: unknown key; expected one of kappa, "):
        apply_overrides(TrainConfig(), {"env": {"sim": {"limit_stifness": 1.0}}})
    with pytest.raises(ConfigError, match=r"^env\.sim\.limit_stiffness=-1\.0: too small"):   # every setting reachable
        apply_overrides(TrainConfig(), {"env": {"sim": {"limit_stiffness": -1.0}}}).validate()
    with pytest.raises(ConfigError, match=r"^env\.reference_frames=\[\]: empty; "
                       r"expected a non-empty list of integers, each >= 1$"):
        make(reference_frames=())
    with pytest.raises(ConfigError, match=r"^env\.rest_start_fraction=1\.5: too large; expected a number in "
                       r"\[0, 1\]$"):
        make(rest_start_fraction=1.5)
    with pytest.raises(ConfigError, match=r"^env\.rest_start_tilt_deg=45\.0: too large; "
                       r"expected a lean of 0\.\.30 deg"):
        apply_overrides(TrainConfig(), {"env": {"rest_start_tilt_deg": 45.0}}).validate()
    with pytest.raises(ConfigError, match=r"^env\.rest_start_tip_rate=-0\.1: too small; expected a number >= 0$"):
        apply_overrides(TrainConfig(), {"env": {"rest_start_tip_rate": -0.1}}).validate()


def dropped(env):
    """Every robot 10 cm above the floor falling at 1.2 m/s (the landing opens bundles)."""
    env.q = torch.as_tensor(np.tile(env.model.default_qpos(0.857), (N, 1)))
    env.qd = torch.zeros_like(env.qd)
    env.qd[:, 2] = -1.2


def test_no_grad_steps_after_bundled_steps_follow_the_plain_physics():
    """Bundles opened by taped steps must not carry stale branches into no-grad steps (PPO, evaluation)."""
    env = make(bundle=True, termination_body_error=100.0)
    plain = make(bundle=False, termination_body_error=100.0)
    env.reset()
    dropped(env)
    a = torch.zeros(N, env.act_dim)
    while not env.sim.bundler.bundle_env:
        env.step(a)
        env.cut_graph()
    plain.load_state_dict({**env.state_dict(), "simulator": {}})
    with torch.no_grad():
        for _ in range(3):
            env.step(a)
            plain.step(a)
    np.testing.assert_array_equal(env.q.numpy(), plain.q.numpy())
    # the taped simulator's bundles close before its next step
    assert set(env.sim.bundler.bundle_env) <= set(env.sim.segment.pending_restarts)


def test_a_diverged_environment_fails_alone():
    env = make()
    env.reset()
    env.qd = env.qd.clone()
    env.qd[1, 8] = float("nan")
    step = env.step(torch.zeros(N, env.act_dim))
    assert step.terminated.tolist() == [False, True, False]
    assert torch.isfinite(step.obs).all() and torch.isfinite(step.obs_before_reset).all()
    assert torch.isfinite(step.add_sim).all() and torch.isfinite(env.q).all()


def test_the_reference_root_velocity_is_observed_in_the_reference_frame_when_asked():
    env = make(reference_root_velocity=True)
    obs = env.reset().double()
    assert env.policy_contract().observation.terms[-1].name == "ref_root_lin_vel"
    future = torch.clamp(env.frame[:, None] + torch.tensor(env.frames), max=env.ref.num_frames - 1)
    velocity = env.ref.root_lin_vel[future]                                       # (N, F, 3) world
    w, x, y, z = env.ref.root_quat[future].unbind(-1)
    heading = torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], -1)  # R[:, 0]
    forward = (velocity * heading).sum(-1)                                      # (R^T v)_x
    torch.testing.assert_close(obs[:, -9::3], forward, rtol=1e-5, atol=1e-5)
    assert velocity.norm(dim=-1).max() > 0.1           # the synthetic jump moves: the check is not of zeros


def test_a_step_without_restarts_asks_the_device_once():
    """The host learns whether any environment is done with one question per step (besides the
    simulator's non-finite check where it is on); restarts then cost their indices' copy."""
    from bcg_train.algo.phases import PhaseTimer, count_host_syncs, phase
    env = make()
    env.reset()
    with PhaseTimer() as timer, count_host_syncs(timer):
        with phase("step"):
            step = env.step(torch.zeros(N, env.act_dim, requires_grad=True))   # the training path
    assert not (step.terminated | step.truncated).any()
    assert timer.syncs["step"] == 1 + env.sim.check_finite


def test_the_failure_margin_penalty_rises_towards_each_failure_test_differentiably():
    """-w (ramp(e, m L, L) + ramp(p, m P, P)): nothing on the reference, the world ramp for a drift the
    posture does not show, and a gradient through the simulator into the actions."""
    from bcg_train.imitation.reward_terms import ramp
    assert "failure_margin" not in make().step(torch.zeros(N, 29)).reward_terms
    np.testing.assert_allclose(ramp(torch.tensor([0.1, 0.25, 0.4, 0.5]), 0.25, 0.5).numpy(), [0, 0, 0.36, 1.0])
    env = make(failure_margin_penalty=2.0, failure_margin=0.5, termination_body_error=1.0,
               termination_body_frame="world", posture_error_limit_m=0.3)
    env.reset()
    shift = torch.zeros(env.q.shape[1], dtype=env.q.dtype)
    shift[0] = 0.8                                              # 0.8 m sideways: e = 0.8 of L = 1, p ~ 0
    env.q = env.q + shift * torch.tensor([[1.0], [0.0], [0.0]], dtype=env.q.dtype)
    actions = torch.zeros(N, env.act_dim, requires_grad=True)
    step = env.step(actions)
    term = step.reward_terms["failure_margin"]
    assert term[0].item() == pytest.approx(-2.0 * ((0.8 - 0.5) / 0.5) ** 2, rel=0.05)
    assert term[1:].abs().max() < 1e-3                          # on the reference: (almost) nothing
    term[0].backward()
    assert actions.grad[0].abs().sum() > 0
    with pytest.raises(ConfigError, match=r"^env\.failure_margin=1\.0: too large; expected a number in \[0, 1\)$"):
        make(failure_margin=1.0)
    with pytest.raises(ConfigError, match=r"^env\.posture_error_limit_m=0\.0: too small; "):
        make(posture_error_limit_m=0.0)


KNOWN_TERMS = {      # (2 steps, 3 environments) of `test_the_reward_table_reproduces_the_known_terms`, as the
    # environment computed them before its terms became a table (one `if` per term)
    "action_rate": [[-0.13609882, -0.21069978, -0.10829817], [-0.27441597, -0.29568216, -0.16994001]],
    "alive": [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]],
    "root_velocity": [[0.16659361, 0.84453887, 0.50030029], [0.12545861, 0.97788352, 0.61208709]],
    "failure_margin": [[-8.1152696e-04, -5.5426735e-05, -4.3018337e-04], [-6.5975902e-03, -2.1181654e-04,
                                                                             -3.4538759e-03]],
    "leg_clearance": [[-51.154125, -48.996063, -49.765560], [-50.872925, -48.894886, -49.690517]],
}
"""Their sum over steps and environments was -294.35391, its gradient w.r.t. the actions summed to
-1.8797603 with norm 1.3140449."""


def test_the_reward_table_reproduces_the_known_terms():
    """Every term of `REWARD_TERMS` on, two steps of three robots from fixed actions: the logged names,
    each term, the total and the total's gradient w.r.t. the actions are what the environment gave
    before its terms were a table (training runs of the same recipe stay comparable)."""
    from bcg_train.imitation.reward_terms import REWARD_TERMS
    env = make(alive_reward=0.5, root_velocity_reward=1.0, root_velocity_sigma=0.25, failure_margin_penalty=1.0,
               failure_margin=0.0, leg_clearance_penalty=0.5, leg_clearance_margin_m=0.5)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = (0.3 * torch.randn(2, N, env.act_dim, generator=gen, dtype=torch.float64)).requires_grad_(True)
    steps = [env.step(actions[t]).reward_terms for t in range(2)]
    assert [t.name for t in REWARD_TERMS] == list(steps[0]) == list(KNOWN_TERMS)
    for name, known in KNOWN_TERMS.items():
        np.testing.assert_allclose([s[name].tolist() for s in steps], known, rtol=1e-5, atol=1e-9, err_msg=name)
    total = sum(sum(s.values()).sum() for s in steps)
    assert total.item() == pytest.approx(-294.35391, rel=1e-6)
    total.backward()
    assert (actions.grad.sum().item(), actions.grad.norm().item()) == pytest.approx((-1.8797603, 1.3140449), rel=1e-5)
    assert list(make(alive_reward=0.5).step(torch.zeros(N, 29)).reward_terms) == ["action_rate", "alive"]


def test_adaptive_starts_start_where_episodes_fail_and_resume_exactly():
    """An env that fails at every step in the clip's second bin draws most starts there (and in the
    bin before it), keeps drawing the others, and its state round-trips."""
    from bcg_train.imitation.start_sampling import AdaptiveStartConfig
    cfg = AdaptiveStartConfig(enabled=True, bin_s=1.0, uniform_fraction=0.2, lead_bins=1, decay=0.9)
    env = make(adaptive_starts=cfg)
    sampler = env.adaptive_starts
    assert sampler.num_bins == env._last_start // 50 + 1 and sampler.num_bins >= 4
    frames = torch.tensor([10, 60, 70, 160])
    for _ in range(20):                                         # windows of steps: bin 1 fails, the others never
        sampler.record(frames, frames // 50 == 1)
        env.cut_graph()
    w = sampler.weights
    assert w.sum().item() == pytest.approx(1.0)
    assert env._counters()["start_weight_max"] == pytest.approx(float(w.max()) * sampler.num_bins)
    assert w[1] > 0.5 and w[0] == pytest.approx(0.2 / sampler.num_bins + 0.8 * (0.5 / 1.5))
    assert (w[2:] == pytest.approx(0.2 / sampler.num_bins))
    starts = sampler.draw(4000, torch.Generator().manual_seed(0))
    share = torch.bincount(sampler.bins(starts), minlength=sampler.num_bins).double() / 4000
    np.testing.assert_allclose(share.numpy(), w.numpy(), atol=0.03)
    assert starts.min() >= 0 and starts.max() <= env._last_start
    twin = make(adaptive_starts=cfg)
    twin.load_state_dict(env.state_dict())
    assert torch.equal(twin.adaptive_starts.weights, w)
    with pytest.raises(ConfigError, match=r"^env\.adaptive_starts\.uniform_fraction=1\.5: too large; "):
        make(adaptive_starts=AdaptiveStartConfig(enabled=True, uniform_fraction=1.5))
