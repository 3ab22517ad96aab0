"""Bundled Contact Gradients in the simulator: identity with the plain simulator where it must be,
exact gradients of the bundled map, contact-local branching, re-perturbation, the nominal-forward
ablation, seeding and bad configuration; at the end, bundling with its bookkeeping on the device
(`bundle.on_device`): the host's bundles to the last bit given the device's perturbations, rows within
the slots, a uniform draw, exact resume (captured as graphs: test_diffsim_step_graphs). Scenario: PD
holding the default pose, dropped so the feet hit the floor hard enough to trigger (400 N on a sphere)."""
import dataclasses

import numpy as np
import pytest
import warp as wp

from bcg.config_check import ConfigError
from bcg_train.diffsim import BundleConfig, BundleExperiments, Model, SimConfig, Simulator, Tape
from bcg_train.diffsim.bundling import slot_kernels as sk
from bcg_train.diffsim.bundling.kernels import NOISE_PER_ROW, BundlingKernels

DT = 0.02
DROP = 0.10           # m above standing height
FALL_SPEED = 1.2      # m/s downwards at the start
RNG = np.random.default_rng(3)


MODEL = Model.from_mujoco(device="cpu")
bk = BundlingKernels.of(MODEL.types)
STANDING = MODEL.robot.standing_height      # m, pelvis height with the feet on the floor


def sim_config(experimental=None, **bundle) -> SimConfig:
    """kappa 300 with these bundle settings and experiments (a mapping; bundling off when none are given)."""
    return SimConfig(kappa=300.0, bundle=BundleConfig(**bundle, experimental=BundleExperiments(**(experimental or {}))))


def initial_state(model, n, dropped=None, roll=0.0):
    """(q (n, nq), qd (n, nv)): dropped envs start DROP high falling at FALL_SPEED, the others stand."""
    dropped = np.ones(n, bool) if dropped is None else np.asarray(dropped)
    q = np.tile(MODEL.default_qpos(STANDING), (n, 1))
    qd = np.zeros((n, MODEL.nv))
    q[dropped, 2] += DROP
    qd[dropped, 2] = -FALL_SPEED
    q[:, 3:7] = [np.cos(roll / 2), np.sin(roll / 2), 0.0, 0.0]
    return q, qd


def rollout(config, steps, q0, qd0, actions, requires_grad=False, weights=None, setup=None, before_step=None):
    """Final (q, qd), the gradient of weights . q_final wrt the actions (when weights is given), stats;
    `setup(sim)` first, `before_step(sim, t)` before each step t."""
    n = q0.shape[0]
    sim = Simulator(MODEL, n, config, requires_grad=requires_grad)
    if setup is not None:
        setup(sim)
    r = MODEL.robot
    s = sim.state().assign(q0, qd0)
    ctrl = sim.control().set_pd(q_target=actions, kp=r.kp * 10, kd=r.kd * 3)
    tape = Tape()
    with tape:
        for t in range(steps):
            if before_step is not None:
                before_step(sim, t)
            s1 = sim.state()
            sim.step(s, s1, ctrl, DT)
            s = s1
    grad = None
    if weights is not None:
        tape.backward(grads={s.q: wp.array(weights, dtype=wp.float64)})
        grad = ctrl.q_target.grad.numpy()
    return s.q.numpy(), s.qd.numpy(), grad, sim.bundle_stats


@pytest.fixture(scope="module")
def plain():
    return sim_config()


def test_one_unperturbed_branch_is_bit_identical_to_the_plain_simulator(plain):
    one = sim_config(enabled=True, branches=1, sigma_p=0.0, sigma_v=0.0)
    q0, qd0 = initial_state(MODEL, 2)
    a = np.tile(MODEL.robot.default_q, (2, 1))
    w = RNG.normal(size=(2, MODEL.nq))
    q_p, qd_p, g_p, _ = rollout(plain, 6, q0, qd0, a, True, w)
    q_b, qd_b, g_b, stats = rollout(one, 6, q0, qd0, a, True, w)
    assert stats.bundles >= 2 and stats.branch_substeps > 0
    np.testing.assert_array_equal(q_b, q_p)
    np.testing.assert_array_equal(qd_b, qd_p)
    np.testing.assert_allclose(g_b, g_p, rtol=1e-10, atol=1e-12)


IMPACT_ONLY = {"onset_fraction": 0.25, "end_when_released": True}
"""Bundle settings that bundle only the impact: bundles open at an onset and end once released."""


@pytest.mark.parametrize("impact_only", [False, True])
def test_bundled_gradient_equals_finite_differences_of_the_bundled_map(frozen_noise, impact_only):
    """Perturbations are constants of the bundled map: recorded once, replayed in the FD runs. Bundles
    that end early (released) are part of the map too."""
    config = sim_config(enabled=True, branches=4, **(IMPACT_ONLY if impact_only else {}))
    q0, qd0 = initial_state(MODEL, 2)
    a0 = np.tile(MODEL.robot.default_q, (2, 1)) + RNG.normal(0, 0.02, (2, MODEL.nj))
    w = RNG.normal(size=(2, MODEL.nq))
    log = []

    def record(sim):
        frozen_noise(sim, log, True)

    def replay(sim):
        frozen_noise(sim, log, False)

    _, _, grad, stats = rollout(config, 6, q0, qd0, a0, True, w, setup=record)
    assert stats.bundles == 2
    if impact_only:
        assert stats.released == 2 and stats.bundled_env_substeps < 2 * 8
    else:
        assert stats.bundled_env_substeps == 2 * 8 and stats.released == 0
    eps = 1e-6
    for _ in range(2):
        u = RNG.normal(size=a0.shape)
        u /= np.linalg.norm(u)
        plus = rollout(config, 6, q0, qd0, a0 + eps * u, setup=replay)[0]
        minus = rollout(config, 6, q0, qd0, a0 - eps * u, setup=replay)[0]
        fd = np.sum((plus - minus) * w) / (2 * eps)
        assert abs(np.sum(grad * u) - fd) < 1e-4 * abs(fd), (np.sum(grad * u), fd)


def test_branches_exist_only_for_triggered_environments():
    config = sim_config(enabled=True, branches=5)
    dropped = np.array([True, False, False, True, False, False])
    q0, qd0 = initial_state(MODEL, 6, dropped)
    q, _, _, stats = rollout(config, 6, q0, qd0, np.tile(MODEL.robot.default_q, (6, 1)))
    substeps = 6 * config.substeps
    assert stats.env_substeps == 6 * substeps
    assert stats.bundles == 2
    assert stats.bundled_env_substeps == 2 * 8
    assert stats.branch_substeps == 2 * 8 * 5 + stats.reperturbations
    assert stats.triggered_fraction == pytest.approx(16 / (6 * substeps))
    assert np.isfinite(q).all()


def test_environments_and_open_branches_take_a_substep_in_one_physics_run():
    """Per substep the physics runs once for the environments and the open bundles' branches together
    (one launch of each kernel), and a second time only when an event re-runs rows (new bundles or a
    re-perturbed leg): one substep per step, counted kernel by kernel over a landing."""
    from bcg_train.diffsim.kernel_profile import profile_kernels
    config = dataclasses.replace(sim_config(enabled=True, branches=5, span_steps=8), substeps=1)
    q0, qd0 = initial_state(MODEL, 4, dropped=[True, False, True, False])
    sim = Simulator(MODEL, 4, config, requires_grad=True)
    r = MODEL.robot
    s = sim.state().assign(q0, qd0)
    ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (4, 1)), kp=r.kp * 10, kd=r.kd * 3)
    runs, open_before = [], []
    with Tape():
        for _ in range(24):
            events = sim.bundle_stats.bundles + sim.bundle_stats.reperturbations
            open_before.append(len(sim.bundler.bundle_env))
            with profile_kernels("cpu") as profile:
                s1 = sim.state()
                sim.step(s, s1, ctrl, DT / 4)
            s = s1
            kinematics = sum(k == "kinematics" for k, _, _ in profile.launches)
            rows = {n for k, _, n in profile.launches if k == "kinematics"}
            runs.append((kinematics, sim.bundle_stats.bundles + sim.bundle_stats.reperturbations > events, rows))
    assert all(k == 1 + event for k, event, _ in runs)
    quiet_with_bundles = [rows for (k, event, rows), m in zip(runs, open_before) if m and not event]
    assert quiet_with_bundles and all(rows == {4 + 5 * 2} for rows in quiet_with_bundles)   # 2 bundles of 5
    assert any(event for _, event, _ in runs)


def _bounded_landing(n, cap, steps, requires_grad=True, sim=None, s=None):
    """Six dropped environments (`initial_state`), B 3, substeps of DT / 4, at most `cap` branch rows
    (unless `sim` and its state `s` are given, to go on): (sim, final state, per step the kinematics
    launches' row counts, the run first, then the re-run when there is one)."""
    from bcg_train.diffsim.kernel_profile import profile_kernels
    if sim is None:
        config = dataclasses.replace(sim_config(enabled=True, branches=3, max_branch_rows=cap), substeps=1)
        sim = Simulator(MODEL, n, config, requires_grad=requires_grad)
        s = sim.state().assign(*initial_state(MODEL, n))
    r = MODEL.robot
    ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (n, 1)), kp=r.kp * 10, kd=r.kd * 3)
    launches = []
    with Tape():
        for _ in range(steps):
            with profile_kernels("cpu") as profile:
                s1 = sim.state()
                sim.step(s, s1, ctrl, DT / 4)
            s = s1
            launches.append([count for kind, _, count in profile.launches if kind == "kinematics"])
            assert sim.bundler.counts.sum() <= cap
    return sim, s, launches


def test_max_branch_rows_bounds_every_physics_run():
    """Six environments landing together, B 3, at most 6 branch rows: no substep runs the physics on
    more than 6 + 6 rows or re-runs more than 6, never more than two bundles are open, and the
    environments refused at the touch-down are counted, each substep they are refused."""
    n, cap = 6, 6
    sim, s, launches = _bounded_landing(n, cap, 40)
    assert max(run[0] for run in launches) == n + cap
    assert max(max(run[1:], default=0) for run in launches) == cap
    stats = sim.bundle_stats
    assert (stats.bundles, stats.skipped_events, stats.bundled_env_substeps) == (4, 8, 8)
    assert np.isfinite(s.q.numpy()).all()


def test_who_gets_the_rows_is_a_uniform_draw():
    """4096 environments, 11 of them triggering in every substep, room for 2 bundles: over 4096
    substeps each is admitted about 2/11 of the time (a rotation by the substep count would give the
    rows to the first two after the widest gap nearly every time)."""
    sim = Simulator(MODEL, 1, sim_config(enabled=True, branches=3, max_branch_rows=6))
    n, triggered = 4096, np.arange(100, 111)
    admitted = np.zeros(n, int)
    for substep in range(n):
        sim.bundler.stats.env_substeps = substep * n
        chosen = sim.bundler._admit(triggered, 0, 3, n)
        assert len(chosen) == 2 and np.all(np.diff(chosen) > 0) and set(chosen) <= set(triggered)
        admitted[chosen] += 1
    expected = n * 2 / 11
    assert np.all(np.abs(admitted[triggered] - expected) < 0.1 * expected), admitted[triggered]
    assert sim.bundle_stats.skipped_events == n * 9


def test_a_bounded_landing_resumes_exactly():
    n, cap = 6, 6
    sim, s, _ = _bounded_landing(n, cap, 14, requires_grad=False)
    assert sim.bundle_stats.skipped_events > 0 and len(sim.bundler.bundle_env) > 0
    saved, q, qd = sim.state_dict(), s.q.numpy(), s.qd.numpy()
    _, going_on, _ = _bounded_landing(n, cap, 10, sim=sim, s=s)
    fresh = Simulator(MODEL, n, sim.config)
    fresh.load_state_dict(saved)
    fresh, resumed, _ = _bounded_landing(n, cap, 10, sim=fresh, s=fresh.state().assign(q, qd))
    np.testing.assert_array_equal(resumed.q.numpy(), going_on.q.numpy())
    assert fresh.bundle_stats == sim.bundle_stats
    saved["stats"]["branches"] = 7               # e.g. a run whose auto_branches chose B 7
    with pytest.raises(ValueError, match="max_branch_rows=6 cannot hold one bundle of the 7 branches"):
        fresh.load_state_dict(saved)
    assert fresh.bundle_stats == sim.bundle_stats            # nothing restored


def test_a_row_bound_that_every_bundle_just_fits_changes_nothing():
    q0, qd0 = initial_state(MODEL, 3, dropped=[True, False, True])
    a = np.tile(MODEL.robot.default_q, (3, 1)) + RNG.normal(0, 0.02, (3, MODEL.nj))
    w = RNG.normal(size=(3, MODEL.nq))
    *free, free_stats = rollout(sim_config(enabled=True, branches=4), 6, q0, qd0, a, True, w)
    *bound, bound_stats = rollout(sim_config(enabled=True, branches=4, max_branch_rows=8), 6, q0, qd0, a, True, w)
    assert free_stats.bundles == 2 and bound_stats.skipped_events == 0
    assert dataclasses.asdict(bound_stats) == dataclasses.asdict(free_stats)
    for x, y in zip(free, bound):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("on_device", [False, True])
def test_a_refused_onset_stays_pending_while_its_leg_is_above_the_threshold(on_device):
    """Impact-only trigger (onset_fraction), room for one bundle of 3, landings at 2.5 m/s whose force
    stays above a 200 N threshold for some substeps: environments refused at the touch-down still open
    bundles later in the same stance (without the pending onset, only the first bundle opens); the
    host's bundler and the device's."""
    n = 6
    config = dataclasses.replace(sim_config(enabled=True, branches=3, max_branch_rows=3, threshold=200.0,
                                            on_device=on_device, **IMPACT_ONLY), substeps=1)
    sim = Simulator(MODEL, n, config)
    q0, qd0 = initial_state(MODEL, n)
    qd0[:, 2] = -2.5
    s = sim.state().assign(q0, qd0)
    r = MODEL.robot
    ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (n, 1)), kp=r.kp * 10, kd=r.kd * 3)
    for _ in range(40):
        s1 = sim.state()
        sim.step(s, s1, ctrl, DT / 4)
        s = s1
    sim.segment.cut()       # the device's counters are read at the cut
    assert sim.bundle_stats.skipped_events > 0 and sim.bundle_stats.bundles > 1


def test_open_branches_outlive_the_pools_release_between_substeps_without_gradients():
    """Without gradients the pool is released every substep; the open branches (after a quiet substep
    rows of that substep's run) are kept: whatever the pool hands out next, zeroed, leaves them."""
    config = sim_config(enabled=True, branches=3, span_steps=8)
    q0, qd0 = initial_state(MODEL, 2)
    sim = Simulator(MODEL, 2, config)
    r = MODEL.robot
    s, s1 = sim.state().assign(q0, qd0), sim.state()
    ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (2, 1)), kp=r.kp * 10, kd=r.kd * 3)
    checked = 0
    for _ in range(12):
        events = sim.bundle_stats.bundles + sim.bundle_stats.reperturbations
        sim.step(s, s1, ctrl, DT)
        s, s1 = s1, s
        rows = len(sim.bundler.bundle_env) * 3
        if rows and sim.bundle_stats.bundles + sim.bundle_stats.reperturbations == events:
            kept = sim.bundler.branch_in.q.numpy().copy()
            pool = sim.segment.pool
            pool.release()
            for n in (rows, rows + 2, 2):
                pool.state(n, zero=True)
                pool.scratch(n)
            np.testing.assert_array_equal(sim.bundler.branch_in.q.numpy(), kept)
            checked += 1
    assert checked


def test_a_released_bundle_ends_before_its_h_steps_and_runs_b_branches_while_open():
    """Dropped robots: the landing's force is above 400 N for fewer than a bundle's 8 substeps; with
    end_when_released each bundle ends at the first substep in which no branch's foot is above it,
    and every substep inside a bundle still runs its B branches."""
    q0, qd0 = initial_state(MODEL, 4, dropped=[True, True, False, True], roll=np.radians(2.0))
    a = np.tile(MODEL.robot.default_q, (4, 1))
    full = rollout(sim_config(enabled=True, branches=5), 10, q0, qd0, a)[3]
    short = rollout(sim_config(enabled=True, branches=5, end_when_released=True), 10, q0, qd0, a)[3]
    assert full.bundles == short.bundles == 4 and full.released == 0     # the standing one's feet too
    assert full.bundled_env_substeps == 4 * 8
    assert short.released == 4 and short.bundled_env_substeps < full.bundled_env_substeps
    for stats in (full, short):
        assert stats.branch_substeps == 5 * stats.bundled_env_substeps + stats.reperturbations


def test_onset_trigger_opens_one_bundle_per_crossing_of_the_threshold():
    """Standing robots at a 20 N threshold: every foot sphere stays above it, so the paper's trigger
    opens a bundle again each time one ends (5 of 8 substeps in 40), the onset trigger only at the
    first substep (nothing was above before it)."""
    q0, qd0 = initial_state(MODEL, 2, dropped=[False, False])
    a = np.tile(MODEL.robot.default_q, (2, 1))
    level = rollout(sim_config(enabled=True, branches=3, threshold=20.0), 10, q0, qd0, a)[3]
    onset = rollout(sim_config(enabled=True, branches=3, threshold=20.0, onset_fraction=1.0), 10, q0, qd0, a)[3]
    assert level.bundles == 2 * 5 and level.bundled_env_substeps == 2 * 40
    assert onset.bundles == 2 and onset.bundled_env_substeps == 2 * 8


def test_leg_loads_rank_each_leg_by_its_largest_sphere_impulse():
    """The kernel against numpy: 2 above the threshold, 1 above the onset level, else 0, per leg."""
    rows, nc = 50, MODEL.nc
    impulse = np.zeros((rows, nc, 3))
    impulse[:, :, 0] = RNG.uniform(0.0, 3.0, (rows, nc)) * (RNG.random((rows, nc)) < 0.3)
    loads = wp.zeros((rows, 2), dtype=int)
    wp.launch(bk.leg_loads, (rows, 2), inputs=[Simulator(MODEL, 1).physics.kernel_model,
                                                wp.array(impulse, dtype=wp.vec3d), 2.0, 0.5, loads])
    leg = MODEL.sphere_leg.numpy()
    top = np.stack([np.where(leg == k, impulse[:, :, 0], 0.0).max(axis=1) for k in (0, 1)], axis=1)
    expected = np.where(top > 2.0, 2, np.where(top > 0.5, 1, 0))
    assert set(np.unique(expected)) == {0, 1, 2}
    np.testing.assert_array_equal(loads.numpy(), expected)


def test_a_restored_simulator_knows_which_legs_were_above_the_threshold():
    """Standing robots at a 20 N threshold with the onset trigger: after the first bundle (steps 1-2) no
    other opens, also in a simulator restored from state_dict at step 3, which then steps exactly as
    the original (without the legs' last state it would open bundles at once)."""
    config = sim_config(enabled=True, branches=3, threshold=20.0, onset_fraction=1.0)
    q0, qd0 = initial_state(MODEL, 2, dropped=[False, False])
    original = Simulator(MODEL, 2, config)
    ctrl = original.control().set_pd(q_target=np.tile(MODEL.robot.default_q, (2, 1)),
                                     kp=MODEL.robot.kp * 10, kd=MODEL.robot.kd * 3)
    s = original.state().assign(q0, qd0)
    for _ in range(3):
        s1 = original.state()
        original.step(s, s1, ctrl, DT)
        s = s1
    restored = Simulator(MODEL, 2, config)
    restored.load_state_dict(original.state_dict())
    ends = []
    for sim in (original, restored):
        a = sim.state().assign(s.q.numpy(), s.qd.numpy())
        for _ in range(3):
            b = sim.state()
            sim.step(a, b, ctrl, DT)
            a = b
        ends.append(a.q.numpy())
        assert sim.bundle_stats.bundles == 2
    np.testing.assert_array_equal(*ends)


def test_new_contact_inside_a_bundle_reperturbs_that_leg():
    """Rolled 4 degrees: one foot lands first and opens the bundle, the other lands inside it."""
    config = sim_config(enabled=True, branches=3)
    q0, qd0 = initial_state(MODEL, 1, roll=np.radians(4.0))
    recorded = []

    def record(sim):
        sim.bundler.recorded = recorded

    _, _, _, stats = rollout(config, 4, q0, qd0, MODEL.robot.default_q[None], setup=record)
    assert stats.bundles >= 1 and stats.reperturbations >= 1
    legs = MODEL.leg_dof.numpy()
    first_leg = legs[:6] if np.abs(recorded[0][0][:, legs[:6]]).sum() > 0 else legs[6:]
    other_leg = legs[6:] if first_leg is legs[:6] else legs[:6]
    dq_first, _ = recorded[0]
    assert np.abs(dq_first[:, other_leg]).sum() == 0.0     # the bundle opened on one leg only
    later = np.concatenate([dq for dq, _ in recorded[1:]])
    assert np.abs(later[:, other_leg]).max() > 0.0           # the other leg was perturbed on landing
    assert np.abs(later).max() <= 0.1 + 1e-12


def test_nominal_forward_keeps_the_plain_trajectory_with_bundled_gradients(plain):
    config = sim_config(enabled=True, branches=4, experimental={"nominal_forward": True})
    q0, qd0 = initial_state(MODEL, 2)
    a = np.tile(MODEL.robot.default_q, (2, 1))
    w = RNG.normal(size=(2, MODEL.nq))
    q_p, _, g_p, _ = rollout(plain, 5, q0, qd0, a, True, w)
    q_n, _, g_n, stats = rollout(config, 5, q0, qd0, a, True, w)
    assert stats.bundles == 2
    np.testing.assert_allclose(q_n, q_p, rtol=0, atol=1e-12)
    assert np.abs(g_n - g_p).max() > 1e-3 * np.abs(g_p).max()


def test_perturbations_are_seeded():
    q0, qd0 = initial_state(MODEL, 1)
    a = MODEL.robot.default_q[None]
    runs = [rollout(sim_config(enabled=True, branches=3, seed=s), 4, q0, qd0, a)[0] for s in (1, 1, 2)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert np.abs(runs[0] - runs[2]).max() > 1e-6


def test_a_restarted_env_closes_its_bundle_and_follows_its_own_state(plain):
    """Restarted (e.g. reset) between steps: the environment then steps from the state it is given,
    exactly as the plain simulator does (the other bundle's gradients: the next test)."""
    config = sim_config(enabled=True, branches=2)
    q0, qd0 = initial_state(MODEL, 2)
    sim = Simulator(MODEL, 2, config)
    s0, s1 = sim.state().assign(q0, qd0), sim.state()
    ctrl = sim.control().set_pd(q_target=MODEL.robot.default_q, kp=MODEL.robot.kp * 10, kd=MODEL.robot.kd * 3)
    while len(sim.bundler.bundle_env) < 2:
        sim.step(s0, s1, ctrl, DT)
        s0, s1 = s1, s0
    sim.segment.restart([0])
    standing = np.tile(MODEL.default_qpos(STANDING + 0.002), (2, 1))
    q = s0.q.numpy()
    q[0] = standing[0]
    qd = s0.qd.numpy()
    qd[0] = 0.0
    s0.assign(q, qd)
    sim.step(s0, s1, ctrl, DT)
    assert 0 not in sim.bundler.bundle_env
    ref = Simulator(MODEL, 1, plain)
    r0, r1 = ref.state().assign(standing[:1]), ref.state()
    ref.step(r0, r1, ref.control().set_pd(q_target=MODEL.robot.default_q, kp=MODEL.robot.kp * 10,
                                          kd=MODEL.robot.kd * 3), DT)
    np.testing.assert_array_equal(s1.q.numpy()[0], r1.q.numpy()[0])


def test_restarting_one_env_keeps_the_other_bundles_gradients(frozen_noise):
    """Per-step tapes (torch bridge), one environment restarted between steps: the other environment's
    gradient w.r.t. the actions still equals finite differences of the bundled map."""
    import torch

    from bcg_train.diffsim.torch_bridge import step
    config = sim_config(enabled=True, branches=3)
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    q0, qd0 = (torch.tensor(x) for x in initial_state(MODEL, 2))
    a0 = torch.tensor(np.tile(r.default_q, (2, 1))) + 0.02 * torch.tensor(RNG.normal(size=(2, MODEL.nj)))
    log = []

    def env1_height(a, record):
        sim = Simulator(MODEL, 2, config, requires_grad=True)
        frozen_noise(sim, log, record)
        q, qd = q0, qd0
        for t in range(6):
            q, qd = step(sim, q, qd, a, DT, kp, kd)
            if t == 3:
                assert len(sim.bundler.bundle_env) == 2
                sim.segment.restart([0])
        return q[1].sum()

    a = a0.clone().requires_grad_(True)
    env1_height(a, True).backward()
    assert a.grad[1].abs().sum() > 0
    u = torch.tensor(RNG.normal(size=a0.shape))
    u /= u.norm()
    eps = 1e-6
    with torch.no_grad():
        fd = (env1_height(a0 + eps * u, False) - env1_height(a0 - eps * u, False)) / (2 * eps)
    assert abs((a.grad * u).sum() - fd) < 1e-4 * abs(fd), ((a.grad * u).sum().item(), fd.item())


@pytest.mark.parametrize("field, value", [("branches", 0), ("span_steps", 1.5), ("threshold", -1.0),
                                          ("sigma_p", -0.01), ("damping", 0.0), ("onset_fraction", 1.5),
                                          ("experimental.sigma_p_widths", -0.5),
                                          ("experimental.sigma_v_per_speed", -0.1),
                                          ("max_branch_rows", -1), ("max_branch_rows", 9)])
def test_bad_bundle_config_names_the_field(field, value):
    section, _, name = field.rpartition(".")
    settings = {section: {name: value}} if section else {name: value}
    with pytest.raises(ConfigError, match=f"^bundle.{field}={value}: "):
        Simulator(MODEL, 1, sim_config(enabled=True, **settings))


def _perturb_left_foot(rows, sigma_p, sigma_v, sigma_v_per_speed, base_velocity):
    """foot_perturbation on `rows` copies of a generic bent pose moving at `base_velocity` (m/s, world;
    joints at rest), keeping its noise: (q (nq,), qd (nv,), dq, dqd (rows, nv) of the left leg, clamped
    count, the kernel's (sum of approach speeds, legs), (noise, response, scales) as kept)."""
    q = np.tile(MODEL.default_qpos(STANDING), (rows, 1))
    q[:, 7:] += 0.1 * np.sin(np.arange(MODEL.nq - 7))      # a generic bent pose, same for every row
    qd = np.zeros((rows, MODEL.nv))
    qd[:, :3] = base_velocity
    sim = Simulator(MODEL, rows)
    sc = sim.physics.scratch(rows, False)
    s = sim.state().assign(q, qd)
    sim.physics.run(s, sim.state(), sim.control(), 0.005, sc, None)   # fills the kinematics in sc
    legs = np.zeros((rows, 2), np.int32)
    legs[:, 0] = 1
    dq = wp.zeros((rows, MODEL.nv), dtype=wp.float64)
    dqd = wp.zeros_like(dq)
    clamped = wp.zeros(1, dtype=int)
    approach = wp.zeros(2, dtype=wp.float64)
    kept = (wp.zeros((rows, NOISE_PER_ROW), dtype=wp.float64), wp.zeros((rows, MODEL.nv, 3), dtype=wp.float64),
            wp.zeros((rows, 4), dtype=wp.float64))
    wp.launch(bk.foot_perturbation, dim=(rows, 2), inputs=[
        sim.physics.kernel_model, s.q, sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, sc.vel_ang, sc.vel_lin,
        wp.array(np.arange(rows, dtype=np.int32), dtype=int), wp.array(legs, dtype=int), 11, wp.zeros(1, dtype=int),
        wp.float64(sigma_p), wp.float64(sigma_v), wp.float64(sigma_v_per_speed), wp.float64(1e-4),
        wp.float64(1.0), wp.float64(5.0)], outputs=[dq, dqd, clamped, approach, 1, *kept])
    return (q[0], qd[0], dq.numpy(), dqd.numpy(), clamped.numpy()[0], approach.numpy(),
            tuple(a.numpy() for a in kept))


def _left_foot_kinematics():
    """foot(q (nq,)) -> (the left foot point (mean of its sphere bottoms) [m], the foot's rotation
    matrix), by MuJoCo's forward kinematics."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(MODEL.robot.model_path))
    d = mujoco.MjData(m)
    spheres = MODEL.robot.foot_geoms["left"]
    foot_body = m.geom_bodyid[spheres[0]]

    def foot(qv):
        d.qpos[MODEL.mj_qpos_adr] = qv
        mujoco.mj_kinematics(m, d)
        return (np.mean([d.geom_xpos[g] - [0, 0, m.geom_size[g, 0]] for g in spheres], axis=0),
                d.xmat[foot_body].reshape(3, 3).copy())
    return foot


def _assert_isotropic(samples, sigma):
    """samples (rows, 3): zero mean, covariance sigma^2 I, within sampling error."""
    cov = np.cov(samples.T)
    np.testing.assert_allclose(np.diag(cov), sigma ** 2, rtol=0.2)
    assert np.abs(cov - np.diag(np.diag(cov))).max() < 0.2 * sigma ** 2
    assert np.abs(samples.mean(axis=0)).max() < 4 * sigma / np.sqrt(len(samples))


def test_foot_perturbation_moves_the_foot_by_the_sampled_cartesian_noise():
    """Through the analytic 6-D foot Jacobian's damped pseudo-inverse, the foot point (mean of the
    leg's sphere bottoms, by MuJoCo's forward kinematics) moves by dp ~ N(0, sigma_p^2 I): its sample
    covariance over 600 draws is sigma_p^2 I; the sole keeps its orientation (well under a tenth of a
    degree), and only the leg's hinge joints move."""
    rows, sigma_p = 600, 0.005
    q, _, dq, dqd, clamped, _, (noise, response, scales) = _perturb_left_foot(rows, sigma_p, 0.02, 0.0, [0, 0, 0])
    assert clamped == 0
    left = MODEL.leg_dof.numpy()[:6]
    assert np.abs(np.delete(dq, left, axis=1)).max() == 0.0
    # what the alpha-order mix keeps: the draws, the unit responses and the stds reproduce the perturbation
    np.testing.assert_array_equal(scales, np.tile([sigma_p, 0.02, 0.0, 0.0], (rows, 1)))
    assert np.abs(noise[:, 6:]).max() == 0.0 and np.abs(np.delete(response, left, axis=1)).max() == 0.0
    np.testing.assert_allclose(dq, sigma_p * np.einsum("rdk,rk->rd", response, noise[:, :3]), atol=1e-15)
    np.testing.assert_allclose(dqd, 0.02 * np.einsum("rdk,rk->rd", response, noise[:, 3:6]), atol=1e-15)
    foot = _left_foot_kinematics()
    base, base_rot = foot(q)
    moved = [foot(np.r_[q[:7], q[7:] + dq[i, 6:]]) for i in range(rows)]
    disp = np.array([p - base for p, _ in moved])
    tilt = np.array([np.degrees(np.arccos(np.clip((np.trace(base_rot.T @ r) - 1) / 2, -1, 1))) for _, r in moved])
    assert tilt.max() < 0.1, tilt.max()
    _assert_isotropic(disp, sigma_p)


def test_foot_velocity_perturbation_grows_with_the_feet_approach_speed():
    """With sigma_v_per_speed c, the foot point's velocity changes by dv ~ N(0, (sigma_v + c u)^2 I), u the
    foot's approach speed towards the floor: the robot moves down at 0.8 m/s and sideways at 0.3 m/s
    (joints at rest), so u = 0.8 m/s, which the kernel also adds up; the foot's velocity change J dqd is
    measured by MuJoCo's kinematics (central differences along dqd)."""
    rows, sigma_v, per_speed = 600, 0.005, 0.1
    q, _, _, dqd, clamped, approach, _ = _perturb_left_foot(rows, 0.0, sigma_v, per_speed, [0.3, 0.0, -0.8])
    assert clamped == 0
    np.testing.assert_allclose(approach, [rows * 0.8, rows], rtol=1e-9)
    foot = _left_foot_kinematics()
    eps = 1e-6
    dv = np.array([(foot(np.r_[q[:7], q[7:] + eps * dqd[i, 6:]])[0] - foot(np.r_[q[:7], q[7:] - eps * dqd[i, 6:]])[0])
                   / (2 * eps) for i in range(rows)])
    _assert_isotropic(dv, sigma_v + per_speed * 0.8)


def test_auto_sigma_takes_the_position_noise_from_the_contact_transition_width():
    """The width is where the smoothing s_k(c) = 1 / (1 + exp(kappa c)) goes from 90 % to 10 %; the default
    0.68 widths is the paper's 1 cm at kappa 300 and shrinks with stiffer contact; without auto_sigma the
    fixed stds hold at any kappa."""
    from bcg_train.diffsim.config import CONTACT_TRANSITION_WIDTH
    kappa = 300.0
    smooth = lambda c: 1.0 / (1.0 + np.exp(kappa * c))                          # noqa: E731
    half = CONTACT_TRANSITION_WIDTH / kappa / 2
    np.testing.assert_allclose([smooth(-half), smooth(half)], [0.9, 0.1], rtol=1e-12)
    auto = BundleConfig(experimental=BundleExperiments(auto_sigma=True, sigma_v_per_speed=0.3))
    p300, v300, c300 = auto.perturbation_scales(300.0)
    assert p300 == pytest.approx(0.01, rel=0.01) and (v300, c300) == (0.0, 0.3)
    assert auto.perturbation_scales(1000.0)[0] == pytest.approx(0.3 * p300)
    assert BundleConfig(sigma_p=0.02, sigma_v=0.05).perturbation_scales(1000.0) == (0.02, 0.05, 0.0)


def test_auto_sigma_measures_the_approach_speed_of_landing_feet():
    """The dropped robot lands at about its fall speed (1.2 m/s, plus 10 cm of free fall): the feet
    perturbed when bundles open approach the floor at 1-2 m/s; the speed is measured with auto_sigma or
    without, and survives state_dict."""
    import torch
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    actions = torch.tensor(np.tile(r.default_q, (4, 3, 1)))
    speeds = []
    for auto in (False, True):
        sim = Simulator(MODEL, 3, sim_config(enabled=True, branches=3, experimental={"auto_sigma": auto}),
                        requires_grad=True)
        q, qd = _late_landing_start()
        _window(sim, q, qd, actions, kp, kd)
        speeds.append(sim.bundle_stats.approach_speed)
        restored = Simulator(MODEL, 3, sim.config, requires_grad=True)
        restored.load_state_dict(sim.state_dict())
        assert restored.bundle_stats.approach_speed == speeds[-1]
    assert 1.0 < speeds[0] < 2.0 and 1.0 < speeds[1] < 2.0, speeds


def _window(sim, q, qd, actions, kp, kd):
    """A taped window through the torch bridge: final (q, qd), the action gradient of a fixed loss."""
    import torch

    from bcg_train.diffsim.torch_bridge import step
    a = actions.clone().requires_grad_(True)
    for t in range(len(a)):
        q, qd = step(sim, q, qd, a[t], DT, kp, kd)
    ((q * torch.arange(q.shape[1])).sum() + qd.square().sum()).backward()
    sim.segment.cut()
    return q.detach(), qd.detach(), a.grad


@pytest.mark.parametrize("impact_only", [False, True])
def test_reused_buffers_give_the_values_and_gradients_of_fresh_ones(impact_only):
    """A window on a simulator whose buffers served earlier windows (bundles open across the cut; the
    second time with every row count as before, so every buffer is reused) equals, bit for bit, the
    same window on a new simulator given the same bundles (state_dict)."""
    import torch
    config = sim_config(enabled=True, branches=3, **(IMPACT_ONLY if impact_only else {}))
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    q0, qd0 = (torch.tensor(x) for x in initial_state(MODEL, 3, dropped=[True, True, False]))
    gen = torch.Generator().manual_seed(1)
    actions = torch.tensor(r.default_q) + 0.03 * torch.randn(2, 4, 3, MODEL.nj, generator=gen, dtype=torch.float64)
    used = Simulator(MODEL, 3, config, requires_grad=True)
    q, qd, _ = _window(used, q0, qd0, actions[0], kp, kd)
    bundles = used.state_dict()
    assert len(bundles["bundle_env"]) > 0
    fresh = Simulator(MODEL, 3, config, requires_grad=True)
    fresh.load_state_dict(bundles)
    expected = _window(fresh, q, qd, actions[1], kp, kd)
    for _ in range(2):
        used.load_state_dict(bundles)
        for a, b in zip(_window(used, q, qd, actions[1], kp, kd), expected):
            assert torch.equal(a, b)


def test_one_substep_segments_bundle_as_one_long_segment():
    """Backward and cut after every step of one substep: every substep reuses the same buffers, which
    hold the open bundles' branches; states and each step's action gradient are those without cuts."""
    import torch

    from bcg_train.diffsim.torch_bridge import step
    config = SimConfig(kappa=300.0, substeps=1, bundle=BundleConfig(enabled=True, branches=3, span_steps=8))
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    q0, qd0 = (torch.tensor(x) for x in initial_state(MODEL, 2))
    weights = torch.arange(MODEL.nq, dtype=torch.float64)
    runs = []
    for cut in (False, True):
        sim = Simulator(MODEL, 2, config, requires_grad=True)
        q, qd, out = q0, qd0, []
        for _ in range(30):
            a = torch.tensor(np.tile(r.default_q, (2, 1)), requires_grad=True)
            q, qd = step(sim, q, qd, a, 0.005, kp, kd)
            (q * weights).sum().backward()
            q, qd = q.detach(), qd.detach()
            out += [q, a.grad]
            if cut:
                sim.segment.cut()
        assert sim.bundle_stats.bundles >= 2 and sim.bundle_stats.bundled_env_substeps > 2
        runs.append(out)
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_a_bundled_substep_copies_to_the_host_once(monkeypatch):
    """The leg events of the environments and of the open branches come back in one copy per
    substep (host-to-device copies never read device memory); the clamp counter stays on the device
    until read (and survives state_dict)."""
    config = sim_config(enabled=True, branches=4, max_dq=1e-4)
    q0, qd0 = initial_state(MODEL, 3, roll=np.radians(4.0))
    sim = Simulator(MODEL, 3, config)
    ctrl = sim.control().set_pd(q_target=np.tile(MODEL.robot.default_q, (3, 1)),
                                kp=MODEL.robot.kp * 10, kd=MODEL.robot.kd * 3)
    copies = []
    numpy = wp.array.numpy
    monkeypatch.setattr(wp.array, "numpy", lambda self: copies.append(self.shape) or numpy(self))
    s = sim.state().assign(q0, qd0)
    for _ in range(4):
        s1 = sim.state()
        sim.step(s, s1, ctrl, DT)
        s = s1
    assert len(copies) == 4 * config.substeps + 4               # + the simulator's non-finite check per step
    monkeypatch.undo()
    stats = sim.bundle_stats
    assert stats.bundles >= 1 and stats.reperturbations >= 1      # branches were open while copying once
    clamped = sim.bundler.clamped_perturbations
    assert clamped >= 1                                           # max_dq 1e-4 rad cuts every perturbation
    restored = Simulator(MODEL, 3, config)
    restored.load_state_dict(sim.state_dict())
    assert restored.bundler.clamped_perturbations == clamped
    old = sim.state_dict()                                        # a checkpoint from before: count in stats
    old["stats"] = {**old["stats"], "clamped_perturbations": old.pop("clamped_perturbations")}
    restored.load_state_dict(old)
    assert restored.bundler.clamped_perturbations == clamped and restored.bundle_stats == stats


def test_branch_gradient_spread_is_the_squared_standard_error_and_mean_of_each_bundle():
    """The kernel against numpy: 3 bundles of B = 4 rows after 2 other rows; the middle bundle has no
    gradient and is left out."""
    b, first = 4, 2
    grads = RNG.normal(size=(first + 3 * b, MODEL.nq + MODEL.nv))
    grads[first + b:first + 2 * b] = 0.0
    q_grad = wp.array(grads[:, :MODEL.nq], dtype=wp.float64)
    qd_grad = wp.array(grads[:, MODEL.nq:], dtype=wp.float64)
    spread = wp.zeros(4, dtype=wp.float64)
    wp.launch(bk.branch_gradient_spread, 3, inputs=[q_grad, qd_grad, first, b, spread])
    samples = b * grads[first:].reshape(3, b, -1)[[0, 2]]          # each branch's own gradient sample
    squared_error = (samples.var(axis=1, ddof=1) / b).sum()
    squared_mean = np.square(samples.mean(axis=1)).sum()
    norms = np.square(samples).sum(axis=2)
    top_share = (norms.max(axis=1) / norms.sum(axis=1)).sum()
    np.testing.assert_allclose(spread.numpy(), [squared_error, squared_mean, 2.0, top_share], rtol=1e-12)


def _late_landing_start():
    """Three environments: one dropped (lands in the first window of 4 steps), one dropped from 4 cm
    higher (lands in the second, while the first's bundle is open), one standing."""
    import torch
    q0, qd0 = initial_state(MODEL, 3, dropped=[True, True, False])
    q0[1, 2] += 0.04
    return torch.tensor(q0), torch.tensor(qd0)


def test_branches_that_agree_have_no_spread_and_bundles_of_different_sizes_average_right():
    """Without noise every branch repeats the same computation: the measured spread is 0 (rounding) and
    auto_branches takes B from 3 to its minimum 2 at the first cut; the second bundle opens with B = 2
    while the first (B = 3) is open. States and gradients of both windows are the plain simulator's."""
    import torch

    from bcg_train.diffsim.torch_bridge import step
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    actions = torch.tensor(np.tile(r.default_q, (2, 4, 3, 1)))
    quiet = sim_config(enabled=True, branches=3, sigma_p=0.0, sigma_v=0.0,
                       experimental={"auto_branches": True, "min_branches": 2})
    runs = []
    for config in (quiet, sim_config()):
        sim = Simulator(MODEL, 3, config, requires_grad=True)
        q, qd = _late_landing_start()
        out, counts = [], []
        for window in range(2):
            a = actions[window].clone().requires_grad_(True)
            for t in range(len(a)):
                q, qd = step(sim, q, qd, a[t], DT, kp, kd)
                counts.append(list(sim.bundler.counts) if sim.bundler else [])
            ((q * torch.arange(q.shape[1])).sum() + qd.square().sum()).backward()
            sim.segment.cut()
            q, qd = q.detach(), qd.detach()
            out += [q, qd, a.grad]
            if config.bundle.enabled and window == 0:
                stats = sim.bundle_stats
                assert stats.branch_rse < 1e-12 and stats.branches == 2                  # rounding only
                assert stats.branch_top_share == pytest.approx(1 / 3)                    # 3 equal branches
        if config.bundle.enabled:
            assert [3] in counts[:4] and [3, 2] in counts[4:]
        runs.append(out)
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_auto_branches_follows_the_measured_spread_of_noisy_branches():
    """With the perturbations on, branches disagree (spread > 0): a target far below the measured error
    sends B to max_branches, one far above to min_branches; without auto_branches B stays and the spread
    is still measured. The chosen B and the spread survive state_dict."""
    import torch
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    actions = torch.tensor(np.tile(r.default_q, (4, 3, 1)))
    for auto, target, expected in ((True, 1e-6, 6), (True, 1e6, 2), (False, 1e-6, 3)):
        config = sim_config(enabled=True, branches=3, experimental={"auto_branches": auto, "branch_rse_target": target,
                                                                     "max_branches": 6})
        sim = Simulator(MODEL, 3, config, requires_grad=True)
        q, qd = _late_landing_start()
        _window(sim, q, qd, actions, kp, kd)
        stats = sim.bundle_stats
        assert stats.bundles >= 1 and 0.0 < stats.branch_rse < np.inf
        assert 1 / 3 < stats.branch_top_share <= 1.0
        assert stats.branches == expected
        restored = Simulator(MODEL, 3, config, requires_grad=True)
        restored.load_state_dict(sim.state_dict())
        assert restored.bundle_stats == stats


def test_auto_branches_needs_a_range_that_holds_the_first_b():
    with pytest.raises(ConfigError, match=r"^experimental\.auto_branches=true: min_branches, branches, "
                       r"max_branches are 2, 40, 32; "
                       r"expected 2 <= min_branches <= branches <= max_branches$"):
        BundleConfig(enabled=True, branches=40, experimental=BundleExperiments(auto_branches=True)).validate()


@pytest.mark.parametrize("b", [4, 5])
def test_clip_branch_adjoints_caps_each_row_at_c_times_its_bundles_median(b):
    """The kernel against numpy: 2 bundles after 1 other row (untouched); one row per bundle made 50x
    longer; rows longer than 2 x the (lower) median row length are scaled to it, the others kept."""
    first, clip = 1, 2.0
    grads = RNG.normal(size=(first + 2 * b, MODEL.nq + MODEL.nv))
    grads[first] *= 50.0
    grads[first + b + 2] *= 50.0
    q_grad = wp.array(grads[:, :MODEL.nq], dtype=wp.float64)
    qd_grad = wp.array(grads[:, MODEL.nq:], dtype=wp.float64)
    wp.launch(bk.clip_branch_adjoints, 2, inputs=[q_grad, qd_grad, first, b, clip])
    expected = grads.copy()
    for w in range(2):
        rows = slice(first + w * b, first + (w + 1) * b)
        norms = np.linalg.norm(grads[rows], axis=1)
        limit = clip * np.sort(norms)[(b - 1) // 2]
        expected[rows] *= np.minimum(1.0, limit / norms)[:, None]
    out = np.hstack([q_grad.numpy(), qd_grad.numpy()])
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert np.linalg.norm(out[first]) < np.linalg.norm(grads[first]) / 10
    np.testing.assert_array_equal(out[0], grads[0])


def test_branch_clip_changes_gradients_only_and_a_loose_clip_changes_nothing():
    """Forward values never change; a clip no branch reaches (1e9) gives the unclipped gradients bit for
    bit; a tight one (1.0: every branch longer than the median is cut) changes them."""
    q0, qd0 = initial_state(MODEL, 2, roll=np.radians(4.0))
    a = np.tile(MODEL.robot.default_q, (2, 1))
    w = RNG.normal(size=(2, MODEL.nq))
    runs = {clip: rollout(sim_config(enabled=True, branches=5, experimental={"branch_clip": clip}), 6, q0, qd0, a,
                          True, w)
            for clip in (0.0, 1e9, 1.0)}
    assert runs[0.0][3].bundles >= 2
    for clip in (1e9, 1.0):
        np.testing.assert_array_equal(runs[clip][0], runs[0.0][0])
    np.testing.assert_array_equal(runs[1e9][2], runs[0.0][2])
    assert np.abs(runs[1.0][2] - runs[0.0][2]).max() > 1e-6 * np.abs(runs[0.0][2]).max()


def _order_estimates(q_grad, qd_grad, probe_grad, noise, response, scales, first, b):
    """Per bundle of alpha_order_mix's inputs: its rows and, per perturbed block (leg, kind), the
    per-branch zero-order and first-order samples (B, 3) (see the kernel's docstring), by numpy."""
    legs = MODEL.leg_dof.numpy().reshape(2, -1)
    out = []
    for w in range(len(probe_grad) // b):
        rows = first + w * b + np.arange(b)
        c = b * probe_grad[w * b:(w + 1) * b]
        blocks = {}
        for leg in range(2):
            for kind in range(2):
                s = scales[rows[0], 2 * leg + kind]
                if s > 0:
                    dofs = legs[leg]
                    adjoint = q_grad[rows][:, dofs + 1] if kind == 0 else qd_grad[rows][:, dofs]
                    draws = noise[rows][:, 6 * leg + 3 * kind:][:, :3]
                    blocks[leg, kind] = (b / (b - 1) * (c - c.mean())[:, None] * draws,
                                         b * s * np.einsum("bdk,bd->bk", response[rows][:, dofs], adjoint))
        out.append((rows, blocks))
    return out


def _alpha_order_reference(q_grad, qd_grad, probe_grad, noise, response, scales, first, b, alpha):
    """numpy's alpha_order_mix (see its docstring): the adjoints after the mix with weight `alpha`, and the
    sums of the bundles' variances of the zero- and first-order means."""
    estimates = _order_estimates(q_grad, qd_grad, probe_grad, noise, response, scales, first, b)
    q_grad, qd_grad = q_grad.copy(), qd_grad.copy()
    legs = MODEL.leg_dof.numpy().reshape(2, -1)
    variances = np.zeros(2)
    for rows, blocks in estimates:
        variances += [sum(g.var(axis=0, ddof=1).sum() / b for g in estimate)
                      for estimate in zip(*blocks.values())]
        for (leg, kind), (g0, g1) in blocks.items():
            s, dofs = scales[rows[0], 2 * leg + kind], legs[leg]
            delta = (1 - alpha) * (g0.mean(axis=0) - g1.mean(axis=0))
            r = response[rows[0]][dofs]
            add = r @ np.linalg.solve(r.T @ r, delta) / (s * b)
            target = q_grad if kind == 0 else qd_grad
            cols = dofs + 1 if kind == 0 else dofs
            target[np.ix_(rows, cols)] += add
    return q_grad, qd_grad, variances


def test_alpha_order_mix_is_the_inverse_variance_weighting_of_both_estimates_along_the_noise():
    """The kernel against numpy: 2 bundles of B = 5 after 1 other row (untouched), the first perturbed on
    its left foot only, the second on both; the mixed projection onto the noise's directions is
    alpha first-order + (1 - alpha) zero-order, and the other directions keep their adjoints; both
    estimates' variances are added up; alpha = 1 changes nothing."""
    b, first, nv, nq = 5, 1, MODEL.nv, MODEL.nq
    rows = first + 2 * b
    rng = np.random.default_rng(7)
    legs = MODEL.leg_dof.numpy()
    q_grad, qd_grad = rng.normal(size=(rows, nq)), rng.normal(size=(rows, nv))
    probe_grad, noise = rng.normal(size=2 * b), rng.normal(size=(rows, 12))
    response, scales = np.zeros((rows, nv, 3)), np.zeros((rows, 4))
    response[:, legs] = rng.normal(size=(rows, len(legs), 3))
    response[first + b:] = response[first + b]                  # one source row per bundle
    response[first:first + b] = response[first]
    scales[first:first + b, :2] = [0.01, 0.03]
    scales[first + b:] = [0.01, 0.05, 0.01, 0.02]
    noise[first:first + b, 6:] = 0.0
    kernel_model = Simulator(MODEL, 1).physics.kernel_model
    for alpha in (0.3, 1.0):
        arrays = {name: wp.array(value, dtype=wp.float64) for name, value in
                  dict(q=q_grad, qd=qd_grad, probe=probe_grad, noise=noise, response=response, scales=scales).items()}
        sums = wp.zeros(8, dtype=wp.float64)
        wp.launch(bk.alpha_order_mix, 2, inputs=[kernel_model, arrays["q"], arrays["qd"], arrays["probe"],
                                                 arrays["noise"], arrays["response"], arrays["scales"], first, b,
                                                 wp.float64(alpha), sums])
        want_q, want_qd, variances = _alpha_order_reference(q_grad, qd_grad, probe_grad, noise, response, scales,
                                                            first, b, alpha)
        np.testing.assert_allclose(arrays["q"].numpy(), want_q, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(arrays["qd"].numpy(), want_qd, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(sums.numpy()[6:], variances, rtol=1e-10)
        assert (np.abs(arrays["q"].numpy() - q_grad).max() > 1e-3) == (alpha < 1)     # it moved them


def test_a_branch_probe_adjoint_is_that_branch_s_own_loss(monkeypatch):
    """With alpha_order, each new branch's probe adjoint (what the mix reads) is its share of the loss
    through the bundle's means: for L = w . q_final of environment 0, whose bundle is still open at the
    end (w zero on the base quaternion), 1/B x w . (that branch's final q), through the branch rows'
    reorderings in between (a second bundle opens after it); the other bundle's probes get nothing."""
    import torch
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    config = sim_config(enabled=True, branches=3, span_steps=6, experimental={"alpha_order": True})
    sim = Simulator(MODEL, 3, config, requires_grad=True)
    seen = []
    launch = sim.bundler._mix_launch

    def capture(dim, inputs):
        seen.append(inputs[3].numpy().copy())                        # the new branches' probe adjoints
        launch(dim, inputs)
    monkeypatch.setattr(sim.bundler, "_mix_launch", capture)
    from bcg_train.diffsim.torch_bridge import step
    q, qd = _late_landing_start()
    a = torch.tensor(np.tile(r.default_q, (6, 3, 1)), requires_grad=True)
    for t in range(6):
        q, qd = step(sim, q, qd, a[t], DT, kp, kd)
    assert sim.bundler.bundle_env == [0, 1] and list(sim.bundler.counts) == [3, 3]   # both open at the end
    final_branches = sim.bundler.branch_in.q.numpy().copy()
    w = torch.tensor(RNG.normal(size=q.shape[1]))
    w[3:7] = 0.0
    (q[0] * w).sum().backward()
    sim.segment.cut()
    assert len(seen) == 2                                            # backward order: env 1's bundle first
    np.testing.assert_array_equal(seen[0], np.zeros(3))
    np.testing.assert_allclose(seen[1], final_branches[:3] @ w.numpy() / 3, rtol=1e-10)
    assert np.ptp(seen[1]) > 1e-6 * np.abs(seen[1]).max()           # the branches differ


def test_alpha_order_changes_gradients_only_and_logs_its_weight(frozen_noise):
    """The same noise with and without alpha_order over two windows: states bit for bit; the first
    window's action gradients and branch spread too (no alpha measured yet: first-order only), the
    second's gradients moved but of
    the same size, with the alpha the first measured, in (0, 1); it survives state_dict; replayed noise
    (which keeps no draws) is refused."""
    import torch
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    actions = torch.tensor(np.tile(r.default_q, (4, 3, 1)))
    runs = {}
    for mix in (False, True):
        sim = Simulator(MODEL, 3, sim_config(enabled=True, branches=4, experimental={"alpha_order": mix}),
                        requires_grad=True)
        q, qd = _late_landing_start()
        first = _window(sim, q, qd, actions, kp, kd)
        spread = (sim.bundle_stats.branch_rse, sim.bundle_stats.branch_top_share)
        alpha = sim.bundle_stats.alpha
        runs[mix] = (first, _window(sim, first[0], first[1], actions, kp, kd), alpha, sim, spread)
    (plain_1, plain_2, _, _, spread), (mixed_1, mixed_2, alpha, sim, mixed_spread) = runs[False], runs[True]
    assert mixed_spread == spread                                    # the first window is the plain one
    for a, b in zip(plain_1 + plain_2[:2], mixed_1 + mixed_2[:2]):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    g0, g1 = plain_2[2], mixed_2[2]
    assert torch.isfinite(g1).all() and not torch.equal(g1, g0)
    assert 0.1 < g1.norm() / g0.norm() < 10
    stats = sim.bundle_stats
    assert stats.bundles >= 2 and 0.0 < alpha < 1.0 and 0.0 < stats.alpha < 1.0
    restored = Simulator(MODEL, 3, sim.config, requires_grad=True)
    restored.load_state_dict(sim.state_dict())
    assert restored.bundle_stats == stats
    q, qd = _late_landing_start()
    _window(restored, q, qd, actions, kp, kd)                       # restored open bundles carry probes
    replayed = Simulator(MODEL, 3, sim.config, requires_grad=True)
    frozen_noise(replayed, iter([]), False)
    with pytest.raises(ValueError, match="alpha_order needs sampled perturbations"):
        _window(replayed, *_late_landing_start(), actions, kp, kd)


def test_alpha_order_needs_two_branches():
    with pytest.raises(ConfigError,
                       match=r"^bundle\.experimental\.alpha_order=true: branches is 1; expected branches >= 2"):
        Simulator(MODEL, 1, sim_config(enabled=True, branches=1, experimental={"alpha_order": True}))


def test_zero_order_and_first_order_estimates_of_a_g1_landing_point_the_same_way(monkeypatch):
    """What the mix weighs, on real landings (B = 32, kappa 300, 4 noise seeds): the zero-order estimate
    (branch losses from the probes, times the kept draws) and the first-order one (the entry adjoints
    through the kept responses) of the gradient along the noise agree in direction (mean cosine over the
    bundles above 0.3; a wrong sign, draw or branch order gives about 0 or below)."""
    import torch
    r = MODEL.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    cosines = []
    for seed in range(4):
        sim = Simulator(MODEL, 3, sim_config(enabled=True, branches=32, seed=seed, experimental={"alpha_order": True}),
                        requires_grad=True)
        launch = sim.bundler._mix_launch

        def capture(dim, inputs, launch=launch):
            estimates = _order_estimates(*(x.numpy().copy() for x in inputs[1:7]), *inputs[7:9])
            for _, blocks in estimates:
                g0 = np.concatenate([z.mean(axis=0) for z, _ in blocks.values()])
                g1 = np.concatenate([f.mean(axis=0) for _, f in blocks.values()])
                cosines.append(g0 @ g1 / (np.linalg.norm(g0) * np.linalg.norm(g1)))
            launch(dim, inputs)
        monkeypatch.setattr(sim.bundler, "_mix_launch", capture)
        _, _, grad = _window(sim, *_late_landing_start(), torch.tensor(np.tile(r.default_q, (4, 3, 1))), kp, kd)
        assert torch.isfinite(grad).all()
    assert len(cosines) >= 4 and np.mean(cosines) > 0.3, cosines


@pytest.mark.parametrize("memory, second", [(0.9, 0.9 * 0.25 + 0.1 * 0.75), (0.0, 0.75)])
def test_alpha_is_a_running_mean_of_the_zero_order_variance_share(memory, second):
    """alpha: v0 / (v0 + v1) of the first segment that measured them, then a running mean; (1, 3) measured,
    then (3000, 1000) (the scale does not matter); kept by state_dict."""
    experiments = {"alpha_order": True, "alpha_memory": memory}
    sim = Simulator(MODEL, 1, sim_config(enabled=True, branches=4, experimental=experiments), requires_grad=True)
    bundler = sim.bundler
    for v0, v1, alpha in ((1.0, 3.0, 0.25), (3000.0, 1000.0, second)):
        bundler._sums.assign(np.array([0, 0, 0, 0, 0, 0, v0, v1], dtype=np.float64))
        bundler._spread_recorded = True
        bundler.measure_spread()
        assert bundler.stats.alpha == pytest.approx(alpha)
    restored = Simulator(MODEL, 1, sim.config, requires_grad=True)
    restored.load_state_dict(sim.state_dict())
    restored.bundler._sums.assign(np.array([0, 0, 0, 0, 0, 0, 1.0, 1.0], dtype=np.float64))
    restored.bundler._spread_recorded = True
    restored.bundler.measure_spread()
    bundler._sums.assign(np.array([0, 0, 0, 0, 0, 0, 1.0, 1.0], dtype=np.float64))
    bundler._spread_recorded = True
    bundler.measure_spread()
    assert restored.bundle_stats.alpha == bundler.stats.alpha


# -- bundling on the device (bundle.on_device, bundling.device_bundler) ------------------------------
DEVICE_N = 5
DEVICE_RNG = np.random.default_rng(11)    # not RNG: the tests above keep their draws
DEVICE_ACTIONS = np.tile(MODEL.robot.default_q, (DEVICE_N, 1)) + DEVICE_RNG.normal(0, 0.02, (DEVICE_N, MODEL.nj))
DEVICE_WEIGHTS = DEVICE_RNG.standard_normal((DEVICE_N, MODEL.nq))


def _landings():
    """Four of five robots dropped, rolled, at three speeds: their feet land at different substeps,
    one leg before the other (so branches are perturbed again)."""
    q0, qd0 = initial_state(MODEL, DEVICE_N, dropped=[True, False, True, True, True], roll=0.15)
    qd0[3, 2], qd0[4, 2] = -2.5, -0.5
    return q0, qd0


def _restart_3_at_step_3(sim, t):
    """Environment 3 restarted (its bundle closed) before step 3; the host's bundler notes whether it
    had one open (sim.closed_a_bundle)."""
    if t == 3:
        sim.closed_a_bundle = 3 in getattr(sim.bundler, "bundle_env", ())
        sim.segment.restart([3])


DEVICE_VARIANTS = {"paper": {}, "onset": {"onset_fraction": 0.5}, "release": {"end_when_released": True},
            "nominal_forward": {"experimental": {"nominal_forward": True}, "span_steps": 3}}


@pytest.mark.parametrize("variant", DEVICE_VARIANTS)
def test_device_bundles_are_the_host_bundles_given_the_same_perturbations(variant):
    """Fifteen steps of landings, B 3, bundles of two steps that close and reopen, branches perturbed
    again, a restart: the device bundler (room for every bundle) records its perturbations, the host's
    bundler replays them, and states, gradients and every counter agree to the last bit."""
    bundle = {"enabled": True, "branches": 3, "span_steps": 2, "seed": 5, "threshold": 300.0,
              **DEVICE_VARIANTS[variant]}
    recorded, sims = [], {}

    def record(sim):
        sim.bundler.recorded = recorded
        sims["device"] = sim

    config = sim_config(on_device=True, max_branch_rows=DEVICE_N * 3, **bundle)
    *device, device_stats = rollout(config, 15, *_landings(), DEVICE_ACTIONS, True, DEVICE_WEIGHTS, record,
                                    _restart_3_at_step_3)
    sims["device"].segment.cut()                    # the device's counters are read at the cut
    replayed = iter(recorded)

    def replay(sim):
        sim.bundler.replay = replayed
        sims["host"] = sim

    *host, stats = rollout(sim_config(**bundle), 15, *_landings(), DEVICE_ACTIONS, True, DEVICE_WEIGHTS, replay,
                           _restart_3_at_step_3)
    assert next(replayed, None) is None and len(recorded) >= 5
    for x, y in zip(device, host, strict=True):
        np.testing.assert_array_equal(x, y)
    counters = [(name, getattr(device_stats, name), getattr(stats, name)) for name in sk.COUNTERS]
    assert all(d == h for _, d, h in counters), counters
    assert stats.bundles >= 4 and stats.reperturbations > 0 and np.abs(device[2]).sum() > 0
    assert sims["host"].closed_a_bundle
    if variant == "release":
        assert stats.released > 0


def test_device_rows_stay_in_their_slots_and_refusals_count_as_on_the_host():
    """Six robots landing together, B 3, room for two bundles (the host's test_max_branch_rows_bounds_
    every_physics_run): the same bundles, refused environment-substeps and bundled ones, (4, 8, 8); the
    physics runs 6 + 6 rows and re-runs 6 at every substep, whatever lands."""
    from bcg_train.diffsim.kernel_profile import profile_kernels
    n, counts = 6, {}
    for on_device in (False, True):
        config = dataclasses.replace(sim_config(enabled=True, branches=3, max_branch_rows=6, on_device=on_device),
                                     substeps=1)
        sim = Simulator(MODEL, n, config, requires_grad=True)
        s = sim.state().assign(*initial_state(MODEL, n))
        r = MODEL.robot
        ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (n, 1)), kp=r.kp * 10, kd=r.kd * 3)
        rows = set()
        with Tape():
            for _ in range(40):
                with profile_kernels("cpu") as profile:
                    s1 = sim.state()
                    sim.step(s, s1, ctrl, DT / 4)
                s = s1
                rows.add(tuple(c for kind, _, c in profile.launches if kind == "kinematics"))
        sim.segment.cut()
        st = sim.bundle_stats
        counts[on_device] = (st.bundles, st.skipped_events, st.bundled_env_substeps)
        assert np.isfinite(s.q.numpy()).all()
    assert counts == {False: (4, 8, 8), True: (4, 8, 8)}
    assert rows == {(12, 6)}


def test_who_gets_the_device_rows_is_a_uniform_draw():
    """The device bundler's decisions (`DeviceBundler.decide`) with 11 of 4096 environments triggering
    (in several chunks) and room for 2 bundles, 4096 substeps: always two admitted, in slots that are
    theirs, each about 2/11 of the time; the other nine counted as refused."""
    from bcg_train.diffsim.bundling.device_bundler import Decisions
    from bcg_train.diffsim.kernels.launch import LaunchSites
    n, b, rows, triggered = 4096, 3, 6, np.array([3, 64, 65, 100, 700, 1500, 2047, 2048, 3000, 4000, 4095])
    sim = Simulator(MODEL, n, sim_config(enabled=True, branches=b, max_branch_rows=rows, on_device=True))
    bundler, d, sites = sim.bundler, Decisions(n, rows, rows // b, "cpu"), LaunchSites("cpu")
    loads = np.zeros((rows + n, 2), np.int32)
    loads[rows + triggered, 0] = sk.ABOVE
    d.loads.assign(loads)
    slot_env, env_slot = bundler._ints["slot_env"], bundler._ints["env_slot"]
    admitted = np.zeros(n, int)
    for _ in range(n):
        slot_env.fill_(-1)
        env_slot.fill_(-1)
        d.reuse()
        sites.begin()
        bundler.decide(sites, d)
        chosen, slots = slot_env.numpy(), env_slot.numpy()
        assert len(set(chosen)) == 2 and set(chosen) <= set(triggered), chosen
        assert np.array_equal(slots[chosen], [0, 1]) and (slots >= 0).sum() == 2
        admitted[chosen] += 1
    expected = n * 2 / 11
    assert np.all(np.abs(admitted[triggered] - expected) < 0.1 * expected), admitted[triggered]
    bundler.read_stats()
    assert (bundler.stats.skipped_events, bundler.stats.bundles) == (n * 9, n * 2)


def test_a_device_bundled_run_resumes_exactly():
    """From a state_dict taken with bundles open (some refused), ten more steps in a new simulator give
    the states and counters of going on; a host bundler's state is refused, with nothing restored."""
    n = 6
    config = dataclasses.replace(sim_config(enabled=True, branches=3, max_branch_rows=6, on_device=True), substeps=1)
    r = MODEL.robot

    def steps(sim, s, count):
        ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (n, 1)), kp=r.kp * 10, kd=r.kd * 3)
        for _ in range(count):
            s1 = sim.state()
            sim.step(s, s1, ctrl, DT / 4)
            s = s1
        sim.segment.cut()
        return s

    sim = Simulator(MODEL, n, config)
    s = steps(sim, sim.state().assign(*initial_state(MODEL, n)), 14)
    saved, q, qd = sim.state_dict(), s.q.numpy(), s.qd.numpy()
    assert saved["stats"]["skipped_events"] > 0 and (saved["slot_env"] >= 0).any()
    going_on = steps(sim, s, 10)
    fresh = Simulator(MODEL, n, config)
    fresh.load_state_dict(saved)
    resumed = steps(fresh, fresh.state().assign(q, qd), 10)
    np.testing.assert_array_equal(resumed.q.numpy(), going_on.q.numpy())
    assert fresh.bundle_stats == sim.bundle_stats
    host = Simulator(MODEL, n, dataclasses.replace(config, bundle=dataclasses.replace(config.bundle, on_device=False)))
    with pytest.raises(ValueError, match="saved by the host's bundler"):
        fresh.load_state_dict({**host.state_dict()})
    assert fresh.bundle_stats == sim.bundle_stats


@pytest.mark.parametrize("on_device", [False, True])
def test_a_diverged_bundle_leaves_no_trace_in_the_next_window(on_device):
    """Environment 1 lands (a bundle opens), then diverges under a NaN action; the window is cut and
    environment 1 restarted from a finite state. In the next window every gradient of a loss on
    environment 0 is finite: the closed bundle's rows are gone (host) or their slot's rows copy an
    environment's valid state and control (device), so no zero adjoint meets a NaN partial."""
    n, r = 3, MODEL.robot
    config = sim_config(enabled=True, branches=3, span_steps=20, seed=5, threshold=300.0, max_branch_rows=9,
                        on_device=on_device)
    sim = Simulator(MODEL, n, config, requires_grad=True, check_finite=False)
    q0, qd0 = initial_state(MODEL, n, dropped=[False, True, False])
    s = sim.state().assign(q0, qd0)
    good = np.tile(r.default_q, (n, 1))
    bad = good.copy()
    bad[1] = np.nan
    with Tape():
        for t in range(8):
            ctrl = sim.control().set_pd(q_target=bad if t == 7 else good, kp=r.kp * 10, kd=r.kd * 3)
            s1 = sim.state()
            sim.step(s, s1, ctrl, DT)
            s = s1
    sim.segment.cut()
    assert sim.bundle_stats.bundles > 0
    q, qd = s.q.numpy(), s.qd.numpy()
    assert not np.isfinite(q[1]).all() and np.isfinite(q[[0, 2]]).all()
    q[1], qd[1] = q0[1], qd0[1]
    sim.segment.restart([1])
    s = sim.state().assign(q, qd)
    ctrl = sim.control().set_pd(q_target=good, kp=r.kp * 10, kd=r.kd * 3)
    tape = Tape()
    with tape:
        for _ in range(2):
            s1 = sim.state()
            sim.step(s, s1, ctrl, DT)
            s = s1
    weights = np.zeros((n, MODEL.nq))
    weights[0] = 1.0
    tape.backward(grads={s.q: wp.array(weights, dtype=wp.float64)})
    grad = ctrl.q_target.grad.numpy()
    assert np.isfinite(grad).all() and np.abs(grad[0]).sum() > 0


def test_a_device_bundlers_state_loads_only_where_it_fits():
    """A device bundler's state is refused (ValueError naming the setting, nothing restored) by the
    host's bundler, by a device bundler of another B with as many slots, and in the middle of a
    segment."""
    n = 4
    config = dataclasses.replace(sim_config(enabled=True, branches=4, max_branch_rows=8, on_device=True), substeps=1)
    sim = Simulator(MODEL, n, config, requires_grad=True)
    saved = sim.state_dict()
    host = Simulator(MODEL, n, sim_config(enabled=True, branches=4))
    with pytest.raises(ValueError, match="saved by a bundler on the device"):
        host.load_state_dict(saved)
    other = Simulator(MODEL, n, dataclasses.replace(config, bundle=dataclasses.replace(config.bundle, branches=3)))
    with pytest.raises(ValueError, match="bundle.branches: the state was saved with 4, this bundler has 3"):
        other.load_state_dict(saved)
    r = MODEL.robot
    ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (n, 1)), kp=r.kp * 10, kd=r.kd * 3)
    with Tape():
        sim.step(sim.state().assign(*initial_state(MODEL, n)), sim.state(), ctrl, DT / 4)
    with pytest.raises(ValueError, match="1 taped substeps since the segment's last cut"):
        sim.load_state_dict(saved)
    sim.segment.cut()
    sim.load_state_dict(saved)


@pytest.mark.parametrize("settings, message", [
    ({}, "max_branch_rows is 0; expected max_branch_rows > 0"),
    ({"max_branch_rows": 20, "experimental": {"auto_branches": True, "max_branches": 16}},
     "no experimental.auto_branches"),
    ({"max_branch_rows": 20, "experimental": {"alpha_order": True}}, "no experimental.alpha_order"),
    ({"max_branch_rows": 20, "experimental": {"branch_clip": 3.0}}, "no experimental.branch_clip")])
def test_bad_device_bundling_config_names_the_field(settings, message):
    with pytest.raises(ConfigError, match=f"^bundle.on_device=true: .*{message}"):
        Simulator(MODEL, 1, sim_config(enabled=True, on_device=True, **settings))
