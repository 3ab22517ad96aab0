"""A torch loss over simulated states backpropagates into actions and initial states, and the
gradient matches central finite differences."""
import numpy as np
import pytest
import torch

from bcg_train.diffsim import Model, SimConfig, Simulator
from bcg_train.diffsim.torch_bridge import step


def test_torch_loss_backpropagates_into_actions_and_initial_state():
    model = Model.from_mujoco(device="cpu")
    sim = Simulator(model, 2, SimConfig(kappa=50.0), requires_grad=True)
    r = model.robot
    kp = torch.tensor(r.kp * 10)
    kd = torch.tensor(r.kd * 3)
    q0 = torch.tensor(np.tile(model.default_qpos(0.765), (2, 1)), requires_grad=True)
    qd0 = torch.zeros(2, model.nv, dtype=torch.float64, requires_grad=True)
    gen = torch.Generator().manual_seed(0)
    actions = (torch.tensor(r.default_q).expand(3, 2, -1)
               + 0.05 * torch.randn(3, 2, model.nj, generator=gen, dtype=torch.float64)).requires_grad_(True)
    w = torch.randn(2, model.nq, generator=gen, dtype=torch.float64)

    def loss_fn(a, q_init):
        q, qd = q_init, qd0
        for t in range(3):
            q, qd = step(sim, q, qd, a[t], 0.02, kp, kd)
        return (w * q).sum() + 0.1 * (qd ** 2).sum()

    loss = loss_fn(actions, q0)
    loss.backward()
    assert actions.grad.abs().sum() > 0 and q0.grad.abs().sum() > 0
    u = torch.randn(actions.shape, generator=gen, dtype=torch.float64)
    u /= u.norm()
    eps = 1e-6
    with torch.no_grad():
        fd = (loss_fn(actions + eps * u, q0) - loss_fn(actions - eps * u, q0)) / (2 * eps)
    an = (actions.grad * u).sum()
    assert abs(an - fd) / abs(fd) < 1e-4, (an.item(), fd.item())
    ui = torch.zeros_like(q0)
    ui[:, 7:] = torch.randn(2, model.nq - 7, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        fd = (loss_fn(actions, q0 + eps * ui) - loss_fn(actions, q0 - eps * ui)) / (2 * eps)
    an = (q0.grad * ui).sum()
    assert abs(an - fd) / abs(fd) < 1e-4, (an.item(), fd.item())


def test_bundle_gradients_cross_steps_through_the_torch_bridge(frozen_noise):
    """A bundle spans control steps; its branches are simulator state torch never sees. The
    torch gradient through 5 steps of a hard landing equals finite differences of the same bundled
    map (perturbations recorded once, replayed)."""
    from bcg_train.diffsim import BundleConfig
    model = Model.from_mujoco(device="cpu")
    config = SimConfig(kappa=300.0, bundle=BundleConfig(enabled=True, branches=3))
    r = model.robot
    kp, kd = torch.tensor(r.kp * 10), torch.tensor(r.kd * 3)
    q0 = torch.tensor(np.tile(model.default_qpos(0.857), (2, 1)))
    qd0 = torch.zeros(2, model.nv, dtype=torch.float64)
    qd0[:, 2] = -1.2
    gen = torch.Generator().manual_seed(1)
    a0 = torch.tensor(r.default_q).expand(2, -1) + 0.02 * torch.randn(2, model.nj, generator=gen, dtype=torch.float64)
    w = torch.randn(2, model.nq, generator=gen, dtype=torch.float64)
    log = []

    def loss_fn(a, record):
        sim = Simulator(model, 2, config, requires_grad=True)
        frozen_noise(sim, log, record)
        q, qd = q0, qd0
        for _ in range(5):
            q, qd = step(sim, q, qd, a, 0.02, kp, kd)
        assert sim.bundle_stats.bundles == 2
        return (w * q).sum()

    a = a0.clone().requires_grad_(True)
    loss_fn(a, True).backward()
    u = torch.randn(a.shape, generator=gen, dtype=torch.float64)
    u /= u.norm()
    eps = 1e-6
    with torch.no_grad():
        fd = (loss_fn(a0 + eps * u, False) - loss_fn(a0 - eps * u, False)) / (2 * eps)
    an = (a.grad * u).sum()
    assert abs(an - fd) / abs(fd) < 1e-4, (an.item(), fd.item())


def test_body_frames_match_mujoco_and_finite_differences():
    import mujoco

    from bcg_train.diffsim.torch_bridge import body_frames
    model = Model.from_mujoco(device="cpu")
    sim = Simulator(model, 2)
    gen = torch.Generator().manual_seed(2)
    q = torch.tensor(np.tile(model.default_qpos(0.8), (2, 1)))
    q[:, 7:] += 0.3 * torch.randn(2, model.nq - 7, generator=gen, dtype=torch.float64)
    q[:, 3:7] = torch.tensor([0.9, 0.1, -0.2, 0.3], dtype=torch.float64) / np.sqrt(0.95)
    q.requires_grad_(True)
    pos, quat = body_frames(sim, q)
    m = mujoco.MjModel.from_xml_path(str(model.robot.model_path))
    d = mujoco.MjData(m)
    d.qpos[model.mj_qpos_adr] = q[1].detach().numpy()
    mujoco.mj_kinematics(m, d)
    np.testing.assert_allclose(pos[1].detach().numpy(), d.xpos[model.mj_body_ids], atol=1e-12)
    sign = np.sign(np.sum(quat[1].detach().numpy() * d.xquat[model.mj_body_ids], axis=1, keepdims=True))
    np.testing.assert_allclose(quat[1].detach().numpy() * sign, d.xquat[model.mj_body_ids], atol=1e-12)
    w = torch.randn(pos.shape, generator=gen, dtype=torch.float64)
    wq = torch.randn(quat.shape, generator=gen, dtype=torch.float64)
    ((w * pos).sum() + (wq * quat).sum()).backward()
    u = torch.zeros_like(q)
    u[:, 7:] = torch.randn(2, model.nq - 7, generator=gen, dtype=torch.float64)
    u[:, :3] = torch.randn(2, 3, generator=gen, dtype=torch.float64)
    eps = 1e-6
    with torch.no_grad():
        def f(x):
            p, r = body_frames(sim, x)
            return (w * p).sum() + (wq * r).sum()
        fd = (f(q + eps * u) - f(q - eps * u)) / (2 * eps)
    assert abs((q.grad * u).sum() - fd) < 1e-6 * abs(fd)


def test_a_gradient_simulator_records_on_the_active_tape_and_refuses_to_step_without_one():
    """The silent zero-gradient path is gone: stepping inside `with Tape():` (the simulator's tape, a
    wp.Tape; no tape argument exists) gives the same gradient as the torch bridge, and stepping with
    no simulator tape active raises, a plain wp.Tape (which would not run the simulator's own
    adjoints) named."""
    import warp as wp

    from bcg_train.diffsim import Tape, TapeRequiredError
    from bcg_train.diffsim.torch_bridge import step

    model = Model.from_mujoco(device="cpu")
    config = SimConfig(kappa=300.0)
    r = model.robot
    q0 = np.tile(model.default_qpos(0.77), (2, 1))
    target = np.tile(r.default_q, (2, 1)) + 0.05
    sim = Simulator(model, 2, config, requires_grad=True)
    s0, s1 = sim.state().assign(q0), sim.state()
    ctrl = sim.control().set_pd(q_target=target, kp=r.kp, kd=r.kd)
    tape = Tape()
    with tape:
        sim.step(s0, s1, ctrl, 0.02)
    tape.backward(grads={s1.q: wp.array(np.ones(s1.q.shape), dtype=wp.float64)})
    warp_grad = ctrl.q_target.grad.numpy()

    a = torch.tensor(target, requires_grad=True)
    q, _ = step(Simulator(model, 2, config, requires_grad=True), torch.tensor(q0),
                torch.zeros(2, model.nv, dtype=torch.float64), a,
                0.02, torch.tensor(r.kp), torch.tensor(r.kd))
    q.sum().backward()
    assert np.abs(warp_grad).max() > 1e-3
    np.testing.assert_allclose(warp_grad, a.grad.numpy(), rtol=1e-12, atol=1e-15)

    with pytest.raises(TapeRequiredError, match="needs an active simulator tape: call it inside `with Tape"):
        sim.step(s0, sim.state(), ctrl, 0.02)
    with wp.Tape(), pytest.raises(TapeRequiredError, match="a plain wp.Tape is active"):
        sim.step(s0, sim.state(), ctrl, 0.02)
