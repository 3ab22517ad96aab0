"""Every backward pass checks that its tape is still valid: a step taped before the segment's last
`cut()` (whose buffers, launch sites and captured graphs serve later steps since) raises
`StaleTapeError` instead of returning another step's gradient, launched kernel by kernel and
replayed from captured graphs alike, through torch_bridge and through a simulator tape directly;
on the CPU and, where there is one, on a CUDA device."""
import numpy as np
import pytest
import torch
import warp as wp

from bcg_train.diffsim import Model, SimConfig, Simulator, StaleTapeError, Tape
from bcg_train.diffsim.torch_bridge import step

DEVICES = ["cpu", pytest.param("cuda:0", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                   reason="needs a CUDA device"))]
N = 2
DT = 0.02


@pytest.fixture(scope="module")
def models():
    return {}


def simulator(models, device: str, capture: bool) -> Simulator:
    if device not in models:
        models[device] = Model.from_mujoco(device=device)
    return Simulator(models[device], N, SimConfig(kappa=300.0), requires_grad=True, check_finite=False,
                     capture_graphs=capture)


def start(sim: Simulator, seed: int):
    """(q, qd, actions) of N robots 0.8 m up, falling, under PD targets near the default pose; the
    actions require gradients."""
    model, device = sim.model, sim.model.device
    q = torch.tensor(np.tile(model.default_qpos(0.80), (N, 1)), device=device)
    qd = torch.zeros(N, model.nv, dtype=torch.float64, device=device)
    qd[:, 2] = -0.5
    noise = 0.1 * torch.randn(N, model.nj, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    actions = (torch.tensor(model.robot.default_q) + noise).to(device).requires_grad_(True)
    return q, qd, actions


def taped_step(sim: Simulator, seed: int):
    """One torch_bridge step from `start`: (loss of its result, its actions)."""
    model = sim.model
    q, qd, actions = start(sim, seed)
    kp, kd = (torch.tensor(g, device=model.device) for g in (model.robot.kp * 10, model.robot.kd * 3))
    q1, qd1 = step(sim, q, qd, actions, DT, kp, kd)
    return (q1[:, :3] ** 2).sum() + (qd1 ** 2).sum(), actions


def warm(sim: Simulator, windows: int = 3) -> None:
    """Windows of one step, each cut after its backward pass: with graphs, the position launches, then
    captures, then replays."""
    for k in range(windows):
        loss, _ = taped_step(sim, seed=k)
        loss.backward()
        sim.segment.cut()


@pytest.mark.parametrize("capture", [False, True], ids=["launched", "captured"])
@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_pass_after_the_cut_and_another_step_raises(models, device, capture):
    """Taped step, cut, another step, then the first step's backward pass: StaleTapeError (with graphs
    it returned the later step's gradient), at a position that launches and at one that replays.
    The same steps without the cut give the gradient of a fresh simulator."""
    for windows in (0, 3):
        sim = simulator(models, device, capture)
        warm(sim, windows)
        loss, _ = taped_step(sim, seed=10)
        sim.segment.cut()
        taped_step(sim, seed=11)
        with pytest.raises(StaleTapeError, match="taped before the segment's last cut"):
            loss.backward()

    sim = simulator(models, device, capture)
    warm(sim)
    loss, actions = taped_step(sim, seed=10)
    loss.backward()
    fresh_loss, fresh_actions = taped_step(simulator(models, device, capture), seed=10)
    fresh_loss.backward()
    assert actions.grad.abs().sum() > 0
    torch.testing.assert_close(actions.grad, fresh_actions.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("capture", [False, True], ids=["launched", "captured"])
@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_pass_after_the_cut_alone_raises(models, device, capture):
    """`cut()` says the backward pass is done or will never run: one after it raises, even before
    another step reuses the buffers."""
    sim = simulator(models, device, capture)
    warm(sim)
    loss, _ = taped_step(sim, seed=10)
    sim.segment.cut()
    with pytest.raises(StaleTapeError, match="cut 1 time"):
        loss.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_a_simulator_tape_checks_its_segment_first(models, device):
    """`with Tape(): sim.step(...)`, cut, another step: the tape's backward pass raises before any
    adjoint runs (the inputs' adjoints stay zero); without the cut it runs."""
    sim = simulator(models, device, capture=False)
    model = sim.model
    s0 = sim.state().assign(np.tile(model.default_qpos(0.8), (N, 1)))
    control = sim.control().set_pd(q_target=np.tile(model.robot.default_q, (N, 1)), kp=model.robot.kp,
                                   kd=model.robot.kd)
    ones = wp.array(np.ones((N, model.nq)), dtype=wp.float64, device=model.device)
    for cut in (True, False):
        s1 = sim.state()
        tape = Tape()
        with tape:
            sim.step(s0, s1, control, DT)
        if cut:
            sim.segment.cut()
            with Tape():
                sim.step(s0, sim.state(), control, DT)
            with pytest.raises(StaleTapeError):
                tape.backward(grads={s1.q: ones})
            assert not np.any(control.q_target.grad.numpy())
        else:
            tape.backward(grads={s1.q: ones})
            assert np.any(control.q_target.grad.numpy())
        sim.segment.cut()
