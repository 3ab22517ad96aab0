"""The "paper" contact model (`SimConfig.contact_model`: no velocity bias, projected Jacobi iterations,
solvers.contact_jacobi) beside the default "speculative" one: its gradients against central finite
differences (float64, as test_diffsim_gradients), a drop against MuJoCo on the same XML, and what kappa
does to where the feet rest in each model (bench/contact_models.py measures it in full)."""
import numpy as np
import pytest
import warp as wp

from bcg.config_check import ConfigError
from bcg_train.diffsim import Model, SimConfig, Simulator, State, Tape
from bcg_train.diffsim import gradient_check as fd
from bcg_train.diffsim import mujoco_reference as vd
from bcg_train.diffsim.config import CONTACT_MODELS
from bcg_train.diffsim.solvers.contact_jacobi import ContactJacobi
from bcg_train.diffsim.variation import PhysicsVariation

RNG = np.random.default_rng(11)
N = 2
PAPER = SimConfig(kappa=50.0, contact_model="paper")


standing_q, directional_check = fd.with_rng(RNG, N)


def _contact_inputs(model, config, q):
    """(G, v_free, smooth, sphere heights, physics) of one substep of the robot at rest at q under `config`."""
    sim = Simulator(model, N, config)
    sc = sim.physics.scratch(N, False)
    s_in, s_out = State.zeros(model, N).assign(q), State.zeros(model, N)
    sim.physics.dynamics(s_in, sim.control(), 0.005, sc, None)
    sim.physics.contact(s_in, s_out, 0.005, sc, None)
    return sc.g.numpy(), sc.v_free.numpy(), sc.smooth.numpy(), s_out.contact_height.numpy(), sim.physics


def test_paper_contact_velocity_has_no_bias(model):
    """The paper's law drives the contact velocity J (qd + h qdd_free) itself; the speculative model
    adds c / h (w - (w - beta) s_k(c)) to the normal rows only."""
    q = standing_q(model, lift=0.003)
    _, v_paper, smooth, c, _ = _contact_inputs(model, PAPER, q)
    speculative = SimConfig(kappa=50.0)
    _, v_spec, _, _, _ = _contact_inputs(model, speculative, q)
    w, beta = speculative.contact_speculative, speculative.contact_stabilization
    np.testing.assert_allclose(v_spec[:, 0::3] - v_paper[:, 0::3], c / 0.005 * (w - (w - beta) * smooth),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(v_spec[:, 1::3], v_paper[:, 1::3], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(v_spec[:, 2::3], v_paper[:, 2::3], rtol=1e-12, atol=1e-15)


def _jacobi_numpy(g, v, s, mu, omega, iterations):
    """The paper's iteration written out: p <- proj(p - omega / diag(G) (G (s p) + v)); returns s p."""
    sr = np.repeat(s, 3)
    r = omega / np.diag(g)
    p = np.zeros_like(v)
    for _ in range(iterations):
        z = p - r * (g @ (sr * p) + v)
        for k in range(len(s)):
            n = max(z[3 * k], 0.0)
            t = z[3 * k + 1:3 * k + 3]
            tn = np.linalg.norm(t)
            p[3 * k] = n
            p[3 * k + 1:3 * k + 3] = t if tn <= mu[k] * n else (t * mu[k] * n / tn if tn > 0 else 0.0)
    return sr * p


def _jacobi_loss(model, physics, w, iterations):
    nc, nr = model.nc, model.ndof_contact

    def loss(x, grad):
        g = fd.array(x[:, :nr * nr].reshape(N, nr, nr), grad)
        v = fd.array(x[:, nr * nr:nr * nr + nr], grad)
        s = fd.array(x[:, nr * nr + nr:], grad)
        impulse = wp.zeros((N, nc), dtype=wp.vec3d, requires_grad=grad)
        solver = ContactJacobi(nc, iterations, N, "cpu", model.types)
        tape = Tape()
        with tape:
            solver.solve(physics.kernel_model, g, v, s, impulse, tape if grad else None)
        value = float(np.sum(impulse.numpy() * w))
        if grad:
            tape.backward(grads={impulse: wp.array(w, dtype=wp.vec3d)})
            return value, np.concatenate([g.grad.numpy().reshape(N, -1), v.grad.numpy(), s.grad.numpy()], axis=1)
        return value, None

    return loss


def test_jacobi_iterations_match_the_written_out_law(model):
    q = standing_q(model)
    g, v, s, _, physics = _contact_inputs(model, PAPER, q)
    s = np.clip(s + RNG.uniform(-0.3, 0.3, s.shape), 0.05, 1.0)
    nc = model.nc
    impulse = wp.zeros((N, nc), dtype=wp.vec3d)
    solver = ContactJacobi(nc, PAPER.contact_iterations, N, "cpu", model.types)
    solver.solve(physics.kernel_model, fd.array(g, False), fd.array(v, False), fd.array(s, False), impulse, None)
    mu = model.sphere_friction.numpy()
    for e in range(N):
        expected = _jacobi_numpy(g[e], v[e], s[e], mu, PAPER.contact_relaxation, PAPER.contact_iterations)
        np.testing.assert_allclose(impulse.numpy()[e].reshape(-1), expected, rtol=1e-10, atol=1e-14)


def test_jacobi_solve_gradient(model):
    """Impulses of the Jacobi iterations wrt G (its diagonal sets the step), v_free and the smoothing, with
    contacts in the cone's interior, on its surface and lifting off (normal clamped at zero)."""
    q = standing_q(model)
    q[:, 2] -= 0.004
    g, _, s, _, physics = _contact_inputs(model, PAPER, q)
    nr = model.ndof_contact
    v0 = RNG.normal(0, 0.05, (N, nr))
    v0[:, 0::3] = -0.05
    v0[:, 3] = 0.02                 # one sphere separating
    w = RNG.normal(size=(N, model.nc, 3))
    loss = _jacobi_loss(model, physics, w, PAPER.contact_iterations)
    x0 = np.concatenate([g.reshape(N, -1), v0, s], axis=1)
    err, value = directional_check(loss, x0, eps=1e-8)
    assert abs(value) > 1e-3 and err < 1e-5, err


def _substep_loss(model, config, w_q, w_qd, kp, kd, q_target):
    sim = Simulator(model, N, config, requires_grad=True)

    def loss(x, grad):
        s0, s1 = sim.state(), sim.state()
        s0.q.assign(x[:, :model.nq])
        s0.qd.assign(x[:, model.nq:])
        ctrl = sim.control().set_pd(q_target=q_target, kp=kp, kd=kd)
        tape = Tape()
        with tape:
            sim.step(s0, s1, ctrl, 0.005)
        value = float(np.sum(s1.q.numpy() * w_q) + np.sum(s1.qd.numpy() * w_qd))
        if not grad:
            return value, None
        tape.backward(grads={s1.q: wp.array(w_q, dtype=wp.float64), s1.qd: wp.array(w_qd, dtype=wp.float64)})
        grads = np.concatenate([s0.q.grad.numpy(), s0.qd.grad.numpy()], axis=1)
        sim.segment.cut()
        return value, grads

    return loss


@pytest.mark.parametrize("lift, kappa", [(0.01, 50.0), (-0.004, 300.0)])
def test_paper_model_substep_gradient(model, lift, kappa):
    """A whole substep of the paper's model: feet 11 mm above the ground at kappa 50 (the smoothing's
    action at a distance) or 3 mm into it at kappa 300, falling at 0.2 m/s."""
    r = model.robot
    config = SimConfig(kappa=kappa, substeps=1, contact_model="paper")
    loss = _substep_loss(model, config, RNG.normal(size=(N, model.nq)), RNG.normal(size=(N, model.nv)),
                         r.kp * 10, r.kd * 3, np.tile(r.default_q, (N, 1)))
    x0 = np.concatenate([standing_q(model, lift=lift), RNG.normal(0, 0.05, (N, model.nv))], axis=1)
    x0[:, model.nq + 2] = -0.2
    err, _ = directional_check(loss, x0)
    assert err < 1e-4, err


def test_paper_model_rollout_gradient_wrt_actions(model):
    """10 control steps (40 substeps) at kappa 50 from 1 cm up: landing and standing."""
    r = model.robot
    sim = Simulator(model, N, PAPER, requires_grad=True)
    w_q, w_qd = RNG.normal(size=(N, model.nq)), RNG.normal(size=(N, model.nv)) * 0.1
    q0 = standing_q(model, lift=0.01)

    def loss(x, grad):
        s = sim.state().assign(q0, np.zeros((N, model.nv)))
        ctrl = sim.control().set_pd(kp=r.kp * 10, kd=r.kd * 3)
        ctrl.q_target.assign(x)
        tape = Tape()
        with tape:
            for _ in range(10):
                s_next = sim.state()
                sim.step(s, s_next, ctrl, 0.02)
                s = s_next
        value = float(np.sum(s.q.numpy() * w_q) + np.sum(s.qd.numpy() * w_qd))
        if not grad:
            return value, None
        tape.backward(grads={s.q: wp.array(w_q, dtype=wp.float64), s.qd: wp.array(w_qd, dtype=wp.float64)})
        g = ctrl.q_target.grad.numpy()
        sim.segment.cut()
        return value, g

    a0 = np.tile(r.default_q, (N, 1)) + RNG.normal(0, 0.05, (N, model.nj))
    err, _ = directional_check(loss, a0)
    assert err < 1e-3, err


def test_paper_model_drop_close_to_mujoco(model):
    """The G1 released 5 mm above the floor under the stand gains stays up on its 8 spheres in the paper's
    model at kappa 300, its pelvis within 10 mm of MuJoCo's after 1 s (as the speculative model's is,
    test_diffsim_vs_mujoco), its feet a few millimetres deeper than MuJoCo's."""
    mujoco = vd.mujoco_drop(1.0, model)
    paper = vd.warp_drop(SimConfig(kappa=300.0, contact_model="paper"), 1.0, model)
    assert paper.base_height.min() > 0.7
    assert abs(paper.base_height[-1] - mujoco.base_height[-1]) < 0.010
    assert paper.num_contacts[-1] == 8 and mujoco.num_contacts[-1] == 8
    deeper = mujoco.contact_height[-1] - paper.contact_height[-1]
    assert 0.0 < deeper < 0.010, deeper


def _rest_heights(model, contact_model, kappas, seconds=1.0):
    """Mean signed height [m] of the loaded spheres after `seconds` of standing, from the default pose with
    the feet on the floor, at each kappa."""
    heights = []
    for kappa in kappas:
        trace = vd.warp_drop(SimConfig(kappa=kappa, contact_model=contact_model), seconds, model, clearance=0.0)
        heights.append(trace.contact_height[-1])
    return np.array(heights)


def test_kappa_moves_where_the_feet_rest_in_the_paper_model_only(model):
    """The paper's claim about kappa, in each model: in the paper's law the feet of the standing G1 sink
    deeper the softer the contact (monotone in kappa, millimetres between kappa 50 and 300: the smoothing
    must rise near one before the 10 iterations carry the robot); in the speculative model they rest on
    the surface at any kappa (its stabilisation drives the height to zero)."""
    kappas = (50.0, 100.0, 300.0, 1000.0)
    paper = _rest_heights(model, "paper", kappas)
    assert np.all(np.diff(paper) > 0), paper * 1000
    assert paper[0] < -0.005 and paper[2] - paper[0] > 0.002, paper * 1000
    speculative = _rest_heights(model, "speculative", kappas)
    assert np.ptp(speculative) < 1e-4 and np.abs(speculative).max() < 1e-4, speculative * 1000


def test_contact_model_setting():
    assert SimConfig().contact_model == CONTACT_MODELS[0] == "speculative"
    with pytest.raises(ConfigError, match="contact_model"):
        SimConfig(contact_model="soft").validate()
    with pytest.raises(ConfigError, match="contact_relaxation"):
        SimConfig(contact_relaxation=0.0).validate()
    for name in CONTACT_MODELS:      # a contract records numbers: the model's index
        settings = SimConfig(contact_model=name).contract_settings()
        assert settings["contact_model"] == CONTACT_MODELS.index(name)
        assert SimConfig.from_contract(300.0, settings).contact_model == name
    assert SimConfig.from_contract(300.0, {}).contact_model == "speculative"     # contracts from before it
    with pytest.raises(ConfigError, match="contact_model"):
        SimConfig.from_contract(300.0, {"contact_model": 2})


def test_a_simulator_keeps_its_contact_model(model):
    sim = Simulator(model, 1, SimConfig(contact_model="paper"))
    sim.vary(SimConfig(contact_model="paper", kappa=100.0, contact_relaxation=0.3), PhysicsVariation())
    with pytest.raises(ValueError, match="contact_model"):
        sim.vary(SimConfig(), PhysicsVariation())


def test_paper_model_bundles_on_host_and_device_and_in_float32(model):
    """The contact model is a setting of the substep, so bundling (the host's and the device's bundler)
    and float32 run it too: a landing from 1 cm at kappa 300 opens bundles in both bundlers,
    with the same counters, and float32 follows float64 within its rounding."""
    from bcg_train.diffsim import BundleConfig
    r = model.robot
    q0 = standing_q(model, lift=0.01)

    def land(config, mdl=model):
        sim = Simulator(mdl, N, config)
        s = sim.state().assign(q0, np.zeros((N, model.nv)))
        ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (N, 1)), kp=r.kp * 10, kd=r.kd * 3)
        for _ in range(10):
            s_next = sim.state()
            sim.step(s, s_next, ctrl, 0.02)
            s = s_next
        return s.q.numpy().astype(np.float64), sim

    bundle = BundleConfig(enabled=True, threshold=30.0, max_branch_rows=4 * N * 10)
    _, host = land(SimConfig(kappa=300.0, contact_model="paper", bundle=bundle))
    _, device = land(SimConfig(kappa=300.0, contact_model="paper",
                               bundle=BundleConfig(**{**bundle.__dict__, "on_device": True})))
    device.bundler.read_stats()
    assert host.bundle_stats.bundles > 0
    assert device.bundle_stats.bundles == host.bundle_stats.bundles
    q64, _ = land(SimConfig(kappa=300.0, contact_model="paper"))
    q32, _ = land(SimConfig(kappa=300.0, contact_model="paper", precision="float32"),
                  Model.from_mujoco(device="cpu", precision="float32"))
    assert np.abs(q32 - q64).max() < 2e-3, np.abs(q32 - q64).max()
