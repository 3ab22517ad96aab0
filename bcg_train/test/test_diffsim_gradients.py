"""Analytic gradients (wp.Tape through the Warp kernels) against central finite differences, float64.

Each check compares the tape gradient g of a scalar loss L(x) = w . y(x) (w random, fixed) with the
central difference (L(x + eps u) - L(x - eps u)) / (2 eps) along random unit directions u, and
reports the relative error |g.u - fd| / max(|fd|, tiny).
"""
import numpy as np
import pytest
import warp as wp

from bcg_train.diffsim import Model, SimConfig, Simulator
from bcg_train.diffsim import contact_kernels as ck
from bcg_train.diffsim import dynamics_kernels as dk
from bcg_train.diffsim import spd_solve
from bcg_train.diffsim.simulator import _Scratch

RNG = np.random.default_rng(7)
N = 2


@pytest.fixture(scope="module")
def model():
    return Model.from_mujoco(config=SimConfig(kappa=50.0), device="cpu")


def standing_q(model, n=N, lift=0.0):
    """(n, nq) default pose with the feet just touching (sphere bottoms about 1 mm above ground)."""
    q = np.tile(model.default_qpos(0.758 + lift), (n, 1))
    q[:, 7:] += RNG.normal(0, 0.02, (n, model.nq - 7))
    return q


def directional_check(loss, x0, eps=1e-6, ndir=3):
    """Max relative error of the tape gradient of `loss` at x0 along `ndir` random directions."""
    value, grad = loss(x0, True)
    errs = []
    for _ in range(ndir):
        u = RNG.normal(size=x0.shape)
        u /= np.linalg.norm(u)
        fd = (loss(x0 + eps * u, False)[0] - loss(x0 - eps * u, False)[0]) / (2 * eps)
        an = float(np.sum(grad * u))
        errs.append(abs(an - fd) / max(abs(fd), 1e-9))
    return max(errs), value


def _arr(x, requires_grad):
    return wp.array(x, dtype=wp.float64, device="cpu", requires_grad=requires_grad)


def _kinematics(model, q, qd, sc):
    wp.launch(dk.kinematics, dim=q.shape[0], device="cpu", inputs=[
        q, qd, model.nb, wp.vec3d(*model.gravity), model.body_parent, model.body_dof, model.body_pos, model.body_quat,
        model.body_mass, model.body_com, model.body_inertia, model.jnt_axis, model.jnt_anchor], outputs=[
        sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, sc.vel_ang, sc.vel_lin, sc.acc_ang, sc.acc_lin,
        sc.crb_m, sc.crb_h, sc.crb_i, sc.frc_ang, sc.frc_lin])
    wp.launch(dk.composite, dim=q.shape[0], device="cpu", inputs=[model.nb, model.body_parent],
              outputs=[sc.crb_m, sc.crb_h, sc.crb_i, sc.frc_ang, sc.frc_lin])


def _weighted(y, w):
    return float(np.sum(y.numpy() * w))


def test_mass_matrix_gradient(model):
    w = np.tril(RNG.normal(size=(N, model.nv, model.nv)))

    def loss(qx, grad):
        q = _arr(qx, grad)
        qd = _arr(np.zeros((N, model.nv)), grad)
        sc = _Scratch.allocate(model, N, grad)
        tape = wp.Tape()
        with tape:
            _kinematics(model, q, qd, sc)
            wp.launch(dk.mass_matrix, dim=(N, model.npair), device="cpu", inputs=[
                model.pair_i, model.pair_j, model.dof_body, sc.s_ang, sc.s_lin, sc.crb_m, sc.crb_h, sc.crb_i],
                outputs=[sc.a])
        if grad:
            tape.backward(grads={sc.a: wp.array(w, dtype=wp.float64)})
            return _weighted(sc.a, w), q.grad.numpy()
        return _weighted(sc.a, w), None

    err, _ = directional_check(loss, standing_q(model))
    assert err < 1e-5, err


def test_bias_force_gradient(model):
    w = RNG.normal(size=(N, model.nv))

    def loss(x, grad):
        q = _arr(x[:, :model.nq], grad)
        qd = _arr(x[:, model.nq:], grad)
        sc = _Scratch.allocate(model, N, grad)
        zeros = _arr(np.zeros((N, model.nv)), False)
        tape = wp.Tape()
        with tape:
            _kinematics(model, q, qd, sc)
            wp.launch(dk.generalised_force, dim=(N, model.nv), device="cpu", inputs=[
                q, qd, wp.float64(0.005), model.dof_body, sc.s_ang, sc.s_lin, sc.frc_ang, sc.frc_lin,
                model.dof_armature, model.dof_damping, model.dof_frictionloss, wp.float64(0.02), model.dof_limited,
                model.dof_lower, model.dof_upper, wp.float64(0.2), wp.float64(0.5), zeros, zeros, sc.a],
                outputs=[sc.diag, sc.rhs])
        f = sc.rhs.numpy()[:, :, 0]
        value = float(np.sum(f * w))
        if grad:
            g = np.zeros(sc.rhs.shape)
            g[:, :, 0] = w
            tape.backward(grads={sc.rhs: wp.array(g, dtype=wp.float64)})
            return value, np.concatenate([q.grad.numpy(), qd.grad.numpy()], axis=1)
        return value, None

    x0 = np.concatenate([standing_q(model), RNG.normal(0, 0.5, (N, model.nv))], axis=1)
    err, _ = directional_check(loss, x0)
    assert err < 1e-5, err


def test_spd_solve_gradient(model):
    """X = (A + diag)^-1 B with A the robot's mass matrix pattern: gradient wrt A, diag and B."""
    nv, ncol = model.nv, 3
    sim = Simulator(model, N)
    sc0 = _Scratch.allocate(model, N, False)
    q = _arr(standing_q(model), False)
    _kinematics(model, q, _arr(np.zeros((N, nv)), False), sc0)
    wp.launch(dk.mass_matrix, dim=(N, model.npair), device="cpu", inputs=[
        model.pair_i, model.pair_j, model.dof_body, sc0.s_ang, sc0.s_lin, sc0.crb_m, sc0.crb_h, sc0.crb_i],
        outputs=[sc0.a])
    a0 = sc0.a.numpy()
    mask = a0 != 0
    w = RNG.normal(size=(N, nv, ncol))
    nA = int(mask.sum())

    def loss(x, grad):
        av = np.zeros_like(a0)
        av[mask] = x[:nA]
        a = _arr(av, grad)
        diag = _arr(x[nA:nA + N * nv].reshape(N, nv), grad)
        b = _arr(x[nA + N * nv:].reshape(N, nv, ncol), grad)
        xs = _arr(np.zeros((N, nv, ncol)), grad)
        ld = _arr(np.zeros_like(a0), False)
        tape = wp.Tape()
        with tape:
            spd_solve.solve(model, a, diag, b, xs, ld, tape if grad else None)
        value = _weighted(xs, w)
        if grad:
            tape.backward(grads={xs: wp.array(w, dtype=wp.float64)})
            return value, np.concatenate([a.grad.numpy()[mask], diag.grad.numpy().ravel(), b.grad.numpy().ravel()])
        return value, None

    x0 = np.concatenate([a0[mask], np.full(N * nv, 0.05), RNG.normal(size=N * nv * ncol)])
    err, _ = directional_check(loss, x0, eps=1e-7)
    assert sim is not None and err < 1e-5, err


def _step_loss(model, n_steps, dt, what, w_q, w_qd, q0, qd0, ctrl_kp, ctrl_kd, q_target):
    sim = Simulator(model, N, requires_grad=True)

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
        tape = wp.Tape()
        with tape:
            s = s0
            for _ in range(n_steps):
                s_next = sim.state()
                sim.step(s, s_next, ctrl, dt, tape=tape)
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
    """Impulses of the smoothed contact solve wrt the pre-contact velocities, feet on the ground."""
    w = RNG.normal(size=(N, model.nc, 3))
    q = standing_q(model)

    def loss(qdx, grad):
        qa = _arr(q, grad)
        qd = _arr(qdx, grad)
        sc = _Scratch.allocate(model, N, grad)
        tau = _arr(np.zeros((N, model.nv)), False)
        height = _arr(np.zeros((N, model.nc)), grad)
        impulse = _arr(np.zeros((N, model.nc, 3)), grad)
        nr = model.ndof_contact
        h = wp.float64(0.005)
        tape = wp.Tape()
        with tape:
            _kinematics(model, qa, qd, sc)
            wp.launch(dk.mass_matrix, dim=(N, model.npair), device="cpu", inputs=[
                model.pair_i, model.pair_j, model.dof_body, sc.s_ang, sc.s_lin, sc.crb_m, sc.crb_h, sc.crb_i],
                outputs=[sc.a])
            wp.launch(dk.generalised_force, dim=(N, model.nv), device="cpu", inputs=[
                qa, qd, h, model.dof_body, sc.s_ang, sc.s_lin, sc.frc_ang, sc.frc_lin, model.dof_armature,
                model.dof_damping, model.dof_frictionloss, wp.float64(0.02), model.dof_limited, model.dof_lower,
                model.dof_upper, wp.float64(0.2), wp.float64(0.5), tau, tau, sc.a], outputs=[sc.diag, sc.rhs])
            wp.launch(ck.contact_geometry, dim=(N, model.nc), device="cpu", inputs=[
                sc.xrot, sc.xpos, model.sphere_body, model.sphere_pos, model.sphere_radius, wp.float64(50.0)],
                outputs=[height, sc.smooth])
            wp.launch(ck.contact_jacobian, dim=(N, model.contact_dof_c.shape[0]), device="cpu", inputs=[
                qa, sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, model.sphere_body, model.sphere_pos, model.sphere_radius,
                model.contact_dof_c, model.contact_dof_d], outputs=[sc.rhs])
            spd_solve.solve(model, sc.a, sc.diag, sc.rhs, sc.x, sc.ld, tape if grad else None)
            wp.launch(ck.delassus, dim=(N, nr, nr + 1), device="cpu", inputs=[
                nr, h, model.contact_dof_start, model.contact_dof_d, qd, sc.rhs, sc.x],
                      outputs=[sc.g, sc.v_free])
            wp.launch(ck.projected_gauss_seidel, dim=N, device="cpu", inputs=[
                model.nc, 10, sc.g, sc.v_free, sc.smooth, model.sphere_friction], outputs=[sc.residual, sc.p])
            wp.launch(ck.contact_impulse, dim=(N, model.nc), device="cpu", inputs=[model.nc, 10, sc.p, sc.smooth],
                      outputs=[impulse])
        value = _weighted(impulse, w)
        if grad:
            tape.backward(grads={impulse: wp.array(w, dtype=wp.float64)})
            return value, qd.grad.numpy()
        return value, None

    qd0 = RNG.normal(0, 0.05, (N, model.nv))
    qd0[:, 2] = -0.3   # falling onto the floor
    err, value = directional_check(loss, qd0)
    assert abs(value) > 1e-3       # the contacts carry impulse
    assert err < 1e-4, err


def test_full_substep_gradient():
    model = Model.from_mujoco(config=SimConfig(kappa=50.0, substeps=1), device="cpu")
    r = model.robot
    w_q = RNG.normal(size=(N, model.nq))
    w_qd = RNG.normal(size=(N, model.nv))
    loss = _step_loss(model, 1, 0.005, "state", w_q, w_qd, None, None, r.kp * 10, r.kd * 3, np.tile(r.default_q, (N, 1)))
    x0 = np.concatenate([standing_q(model), RNG.normal(0, 0.05, (N, model.nv))], axis=1)
    x0[:, model.nq + 2] = -0.2
    err, _ = directional_check(loss, x0)
    assert err < 1e-4, err


def test_rollout_20_steps_kappa50_gradient_wrt_actions(model):
    r = model.robot
    w_q = RNG.normal(size=(N, model.nq))
    w_qd = RNG.normal(size=(N, model.nv)) * 0.1
    q0 = standing_q(model, lift=0.01)
    loss = _step_loss(model, 20, 0.02, "action", w_q, w_qd, q0, np.zeros((N, model.nv)), r.kp * 10, r.kd * 3, None)
    a0 = np.tile(r.default_q, (N, 1)) + RNG.normal(0, 0.05, (N, model.nj))
    err, _ = directional_check(loss, a0.ravel().reshape(N, model.nj), eps=1e-6)
    assert err < 1e-3, err
