"""Analytic gradients (the simulator's Tape, a wp.Tape, through the Warp kernels and the hand-written
adjoints) against central finite differences, float64.

Each check compares the tape gradient g of a scalar loss L(x) = w . y(x) (w random, fixed) with the
central difference (L(x + eps u) - L(x - eps u)) / (2 eps) along random unit directions u, and
reports the relative error |g.u - fd| / max(|fd|, tiny).
"""
import numpy as np
import pytest
import warp as wp

from bcg_train.diffsim import SimConfig, Simulator, State, Tape
from bcg_train.diffsim import gradient_check as fd
from bcg_train.diffsim.solvers.contact_pgs import ContactPGS
from bcg_train.diffsim.solvers.sparse_ldl import SparseLDL

RNG = np.random.default_rng(7)
N = 2


CONFIG = SimConfig(kappa=50.0)


standing_q, directional_check = fd.with_rng(RNG, N)


def _weighted(y, w):
    return float(np.sum(y.numpy() * w))


def _dynamics_loss(model, output, w):
    """Loss w . scratch.<output> after `Substep.dynamics` at x = [q | qd] (zero control)."""
    sim = Simulator(model, N, CONFIG, requires_grad=True)

    def loss(x, grad):
        s = sim.state()
        s.q, s.qd = fd.array(x[:, :model.nq], grad), fd.array(x[:, model.nq:], grad)
        sc = sim.physics.scratch(N, grad)
        tape = Tape()
        with tape:
            sim.physics.dynamics(s, sim.control(), 0.005, sc, tape if grad else None)
        y = getattr(sc, output)
        if grad:
            tape.backward(grads={y: wp.array(w, dtype=wp.float64)})
            return _weighted(y, w), np.concatenate([s.q.grad.numpy(), s.qd.grad.numpy()], axis=1)
        return _weighted(y, w), None

    return loss


def test_mass_matrix_gradient(model):
    x0 = np.concatenate([standing_q(model), np.zeros((N, model.nv))], axis=1)
    err, _ = directional_check(_dynamics_loss(model, "a", RNG.normal(size=(N, model.npair))), x0)
    assert err < 1e-5, err


def test_bias_force_gradient(model):
    x0 = np.concatenate([standing_q(model), RNG.normal(0, 0.5, (N, model.nv))], axis=1)
    err, _ = directional_check(_dynamics_loss(model, "force", RNG.normal(size=(N, model.nv))), x0)
    assert err < 1e-5, err


def _mass_matrix(model, q):
    sim = Simulator(model, N, CONFIG)
    s = sim.state().assign(q)
    sc = sim.physics.scratch(N, False)
    sim.physics.dynamics(s, sim.control(), 0.005, sc, None)
    return sc.a.numpy(), sc, sim.physics


def _ldl(physics, grad):
    return SparseLDL(physics.kernel_model, "cpu", N, physics.model.npair, requires_grad=grad)


def test_sparse_solve_gradient(model):
    """x = (A + diag)^-1 b with the robot's mass matrix: gradient wrt A, diag and b."""
    nv, npair = model.nv, model.npair
    a0, _, physics = _mass_matrix(model, standing_q(model))
    w = RNG.normal(size=(N, nv))

    def loss(x, grad):
        a = fd.array(x[:, :npair], grad)
        diag = fd.array(x[:, npair:npair + nv], grad)
        b = fd.array(x[:, npair + nv:], grad)
        xs = fd.array(np.zeros((N, nv)), grad)
        ldl = _ldl(physics, grad)
        tape = Tape()
        with tape:
            ldl.factor(a, diag, tape if grad else None)
            ldl.solve(b, xs, tape if grad else None)
        value = _weighted(xs, w)
        if grad:
            tape.backward(grads={xs: wp.array(w, dtype=wp.float64)})
            return value, np.concatenate([a.grad.numpy(), diag.grad.numpy(), b.grad.numpy()], axis=1)
        return value, None

    x0 = np.concatenate([a0, np.full((N, nv), 0.05), RNG.normal(size=(N, nv))], axis=1)
    err, _ = directional_check(loss, x0, eps=1e-7)
    assert err < 1e-6, err


def test_delassus_gradient(model):
    """G = J (A + diag)^-1 J^T on the foot chains: gradient wrt A, diag and the Jacobian entries."""
    nv, npair, ncd, nr = model.nv, model.npair, model.ncd, model.ndof_contact
    a0, sc, physics = _mass_matrix(model, standing_q(model))
    jt0 = sc.jt.numpy() if np.abs(sc.jt.numpy()).sum() > 0 else RNG.normal(size=(N, ncd, 3))
    w = RNG.normal(size=(N, nr, nr))

    def loss(x, grad):
        a = fd.array(x[:, :npair], grad)
        diag = fd.array(x[:, npair:npair + nv], grad)
        jt = fd.array(x[:, npair + nv:].reshape(N, ncd, 3), grad, wp.vec3d)
        y = wp.zeros((N, ncd), dtype=wp.vec3d)
        g = fd.array(np.zeros((N, nr, nr)), grad)
        ldl = _ldl(physics, grad)
        tape = Tape()
        with tape:
            ldl.factor(a, diag, tape if grad else None)
            ldl.delassus(jt, y, g, tape if grad else None)
        value = _weighted(g, w)
        if grad:
            tape.backward(grads={g: wp.array(w, dtype=wp.float64)})
            return value, np.concatenate([a.grad.numpy(), diag.grad.numpy(), jt.grad.numpy().reshape(N, -1)], axis=1)
        return value, None

    x0 = np.concatenate([a0, np.full((N, nv), 0.05), jt0.reshape(N, -1)], axis=1)
    err, value = directional_check(loss, x0, eps=1e-7)
    assert abs(value) > 0 and err < 1e-6, err


def test_delassus_matches_dense_formula(model):
    """G from the chain formula equals J A^-1 J^T computed densely with numpy."""
    q = standing_q(model)
    a, sc, physics = _mass_matrix(model, q)
    s_out = State.zeros(model, N)
    physics.contact(State.zeros(model, N).assign(q), s_out, 0.005, sc, None)
    pi, pj = model.pair_i.numpy(), model.pair_j.numpy()
    jt = sc.jt.numpy()
    start, dof = model.contact_dof_start.numpy(), model.contact_dof_d.numpy()
    for e in range(N):
        dense = np.zeros((model.nv, model.nv))
        dense[pi, pj] = a[e]
        dense[pj, pi] = a[e]
        dense += np.diag(sc.diag.numpy()[e])
        jac = np.zeros((model.ndof_contact, model.nv))
        for k in range(model.nc):
            for t in range(start[k], start[k + 1]):
                jac[3 * k:3 * k + 3, dof[t]] = jt[e, t]
        np.testing.assert_allclose(sc.g.numpy()[e], jac @ np.linalg.solve(dense, jac.T), rtol=1e-9, atol=1e-12)


def test_projected_gauss_seidel_gradient(model):
    """Impulses of the projected iterations wrt G, v_free and the smoothing, with contacts in the
    cone's interior, on its surface and lifting off (normal clamped at zero)."""
    nc, nr = model.nc, model.ndof_contact
    q = standing_q(model)
    q[:, 2] -= 0.004
    _, sc, physics = _mass_matrix(model, q)
    s_out = State.zeros(model, N)
    physics.contact(State.zeros(model, N).assign(q), s_out, 0.005, sc, None)
    v0 = RNG.normal(0, 0.05, (N, nr))
    v0[:, 0::3] = -0.05
    v0[:, 3] = 0.02                 # one sphere separating
    w = RNG.normal(size=(N, nc, 3))
    iters = CONFIG.contact_iterations

    def loss(x, grad):
        g = fd.array(x[:, :nr * nr].reshape(N, nr, nr), grad)
        v = fd.array(x[:, nr * nr:nr * nr + nr], grad)
        s = fd.array(x[:, nr * nr + nr:], grad)
        impulse = wp.zeros((N, nc), dtype=wp.vec3d, requires_grad=grad)
        pgs = ContactPGS(nc, iters, N, "cpu", model.types)
        tape = Tape()
        with tape:
            pgs.solve(physics.kernel_model, g, v, s, impulse, tape if grad else None)
        value = _weighted(impulse, w)
        if grad:
            tape.backward(grads={impulse: wp.array(w, dtype=wp.vec3d)})
            return value, np.concatenate([g.grad.numpy().reshape(N, -1), v.grad.numpy(), s.grad.numpy()], axis=1)
        return value, None

    x0 = np.concatenate([sc.g.numpy().reshape(N, -1), v0, sc.smooth.numpy()], axis=1)
    p = loss(x0, False)[0]
    err, value = directional_check(loss, x0, eps=1e-8)
    assert abs(p) > 1e-3 and err < 1e-5, err


def _step_loss(model, config, n_steps, dt, what, w_q, w_qd, q0, qd0, ctrl_kp, ctrl_kd, q_target):
    sim = Simulator(model, N, config, requires_grad=True)

    def loss(x, grad):
        s0 = sim.state()
        ctrl = sim.control().set_pd(kp=ctrl_kp, kd=ctrl_kd)
        if what == "state":
            s0.q.assign(x[:, :model.nq])
            s0.qd.assign(x[:, model.nq:])
            ctrl.q_target.assign(q_target)
        else:
            s0.assign(q0, qd0)
            ctrl.q_target.assign(x.reshape(N, model.nj))
        tape = Tape()
        with tape:
            s = s0
            for _ in range(n_steps):
                s_next = sim.state()
                sim.step(s, s_next, ctrl, dt)
                s = s_next
        value = float(np.sum(s.q.numpy() * w_q) + np.sum(s.qd.numpy() * w_qd))
        if not grad:
            return value, None
        tape.backward(grads={s.q: wp.array(w_q, dtype=wp.float64), s.qd: wp.array(w_qd, dtype=wp.float64)})
        if what == "state":
            return value, np.concatenate([s0.q.grad.numpy(), s0.qd.grad.numpy()], axis=1)
        return value, ctrl.q_target.grad.numpy()

    return loss


def test_contact_impulse_solve_gradient(model):
    """Impulses of the whole smoothed contact solve (dynamics, Delassus, projected iterations) wrt the
    pre-contact velocities, feet on the ground."""
    sim = Simulator(model, N, CONFIG, requires_grad=True)
    w = RNG.normal(size=(N, model.nc, 3))
    q = standing_q(model)

    def loss(qdx, grad):
        s_in, s_out = sim.state(), sim.state()
        s_in.q, s_in.qd = fd.array(q, grad), fd.array(qdx, grad)
        sc = sim.physics.scratch(N, grad)
        tape = Tape()
        with tape:
            sim.physics.dynamics(s_in, sim.control(), 0.005, sc, tape if grad else None)
            sim.physics.contact(s_in, s_out, 0.005, sc, tape if grad else None)
        value = _weighted(s_out.contact_impulse, w)
        if grad:
            tape.backward(grads={s_out.contact_impulse: wp.array(w, dtype=wp.vec3d)})
            return value, s_in.qd.grad.numpy()
        return value, None

    qd0 = RNG.normal(0, 0.05, (N, model.nv))
    qd0[:, 2] = -0.3   # falling onto the floor
    err, value = directional_check(loss, qd0)
    assert abs(value) > 1e-3       # the contacts carry impulse
    assert err < 1e-4, err


@pytest.mark.parametrize("lift, kappa", [(0.0, 50.0), (-0.004, 300.0)])
def test_full_substep_gradient(model, lift, kappa):
    """Feet just above the ground (speculative bias) or 3 mm into it (stabilisation bias)."""
    r = model.robot
    w_q = RNG.normal(size=(N, model.nq))
    w_qd = RNG.normal(size=(N, model.nv))
    loss = _step_loss(model, SimConfig(kappa=kappa, substeps=1), 1, 0.005, "state", w_q, w_qd, None, None,
                      r.kp * 10, r.kd * 3, np.tile(r.default_q, (N, 1)))
    x0 = np.concatenate([standing_q(model, lift=lift), RNG.normal(0, 0.05, (N, model.nv))], axis=1)
    x0[:, model.nq + 2] = -0.2
    err, _ = directional_check(loss, x0)
    assert err < 1e-4, err


def test_rollout_20_steps_kappa50_gradient_wrt_actions(model):
    r = model.robot
    w_q = RNG.normal(size=(N, model.nq))
    w_qd = RNG.normal(size=(N, model.nv)) * 0.1
    q0 = standing_q(model, lift=0.01)
    loss = _step_loss(model, CONFIG, 20, 0.02, "action", w_q, w_qd, q0, np.zeros((N, model.nv)),
                      r.kp * 10, r.kd * 3, None)
    a0 = np.tile(r.default_q, (N, 1)) + RNG.normal(0, 0.05, (N, model.nj))
    err, _ = directional_check(loss, a0.ravel().reshape(N, model.nj), eps=1e-6)
    assert err < 1e-3, err
