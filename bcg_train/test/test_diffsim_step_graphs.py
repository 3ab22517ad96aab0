"""Simulator steps captured as graphs and replayed (`Simulator(capture_graphs=True)`, diffsim.step_graphs)
give the values and gradients of steps launched one kernel at a time, bit for bit, through
`torch_bridge` as training runs them; a replayed window launches no kernel from Python; graphs are
captured again when what they hold by value changes; bundled steps too, with the bundles on the device."""
import dataclasses

import numpy as np
import pytest
import torch
import warp as wp

from bcg_train.diffsim import BundleConfig, Model, NonFiniteStateError, PhysicsVariation, SimConfig, Simulator
from bcg_train.diffsim.kernel_profile import intercepted_launches
from bcg_train.diffsim.step_graphs import CapturedStep
from bcg_train.diffsim.torch_bridge import step, step_without_gradient

DEVICES = ["cpu", pytest.param("cuda:0", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                   reason="needs a CUDA device"))]
N = 3
DT = 0.02


@pytest.fixture(scope="module")
def models():
    return {}


def model_on(models, device) -> Model:
    if device not in models:
        models[device] = Model.from_mujoco(device=device)
    return models[device]


def pd(model, device):
    r = model.robot
    return torch.tensor(r.kp * 10, device=device), torch.tensor(r.kd * 3, device=device)


BUNDLED_ON_DEVICE = SimConfig(kappa=300.0, bundle=BundleConfig(enabled=True, on_device=True, branches=2,
                                                                max_branch_rows=4, span_steps=2, threshold=200.0))
"""Bundling with its bookkeeping on the device, room for two of the three robots' bundles (some refused)."""


def windows(sim: Simulator, lengths, seed: int = 0, dt: float = DT, restart=None):
    """Windows of `lengths` steps through torch_bridge.step from a drop (each from the last one's end,
    the graph cut between them) under random PD targets; per window its final (q, qd) and the
    gradients of a loss of them with respect to the actions and the window's first state. With
    `restart`, those environments are restarted (their states kept) before each window's second step."""
    model, device = sim.model, sim.model.device
    kp, kd = pd(model, device)
    gen = torch.Generator().manual_seed(seed)
    q = torch.tensor(np.tile(model.default_qpos(0.80), (N, 1)), device=device)
    q[:, 0] += torch.arange(N, device=device) * 0.01
    qd = torch.zeros(N, model.nv, dtype=torch.float64, device=device)
    qd[:, 2] = -0.5
    out = []
    for length in lengths:
        q0 = q.clone().requires_grad_(True)
        noise = 0.1 * torch.randn(length, N, model.nj, generator=gen, dtype=torch.float64)
        actions = (torch.tensor(model.robot.default_q) + noise).to(device).requires_grad_(True)
        q, qd = q0, qd
        for k in range(length):
            if k == 1 and restart is not None:
                sim.segment.restart(restart)
            q, qd = step(sim, q, qd, actions[k], dt, kp, kd)
        ((q[:, :3] ** 2).sum() + (qd ** 2).sum()).backward()
        sim.segment.cut()
        out.append(tuple(x.detach().cpu().numpy().copy() for x in (q, qd, actions.grad, q0.grad)))
        q, qd = q.detach(), qd.detach()
    return out


def steps_without_gradient(sim: Simulator, steps: int, fall_speed: float = 0.0):
    """(q, qd) on the host after `steps` steps through torch_bridge.step_without_gradient from 0.80 m,
    falling at `fall_speed` [m/s], PD holding the default pose."""
    model, device = sim.model, sim.model.device
    kp, kd = pd(model, device)
    target = torch.tensor(model.robot.default_q, device=device).expand(N, -1)
    q = torch.tensor(np.tile(model.default_qpos(0.80), (N, 1)), device=device)
    qd = torch.zeros(N, model.nv, dtype=torch.float64, device=device)
    qd[:, 2] = -fall_speed
    for _ in range(steps):
        q, qd = step_without_gradient(sim, q, qd, target, DT, kp, kd)
    return q.cpu().numpy(), qd.cpu().numpy()


def assert_identical(a, b):
    for window_a, window_b in zip(a, b, strict=True):
        for x, y in zip(window_a, window_b, strict=True):
            np.testing.assert_array_equal(x, y)


def assert_close(a, b):
    """Equal within 1e-9 relative: on a GPU, the float atomics of the adjoints that several rows add into
    one (a bundle's branches into their environment's control) may add in another order."""
    for window_a, window_b in zip(a, b, strict=True):
        for x, y in zip(window_a, window_b, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_captured_windows_match_steps_launched_one_by_one(models, device):
    """Four windows (the first launches kernel by kernel, the second captures, the others replay),
    then a longer one (its last positions new after replayed ones): states and gradients equal to
    the last bit. Without gradients too."""
    model = model_on(models, device)
    config = SimConfig(kappa=300.0)
    eager = windows(Simulator(model, N, config, requires_grad=True), (3, 3, 3, 3, 5))
    captured = Simulator(model, N, config, requires_grad=True, capture_graphs=True)
    assert_identical(eager, windows(captured, (3, 3, 3, 3, 5)))
    assert np.abs(eager[-1][2]).sum() > 0

    states = {capture: steps_without_gradient(Simulator(model, N, config, capture_graphs=capture), 5)
              for capture in (False, True)}
    assert_identical([states[False]], [states[True]])


def test_a_replayed_window_launches_no_kernel_from_python(models):
    """The first window runs launch by launch, the second captures, the third replays: no launch
    at all from Python; one kernel at a time launches 13 per substep each way (the check of the
    result, one more launch per step, is off as in training)."""
    model = model_on(models, "cpu")
    counts = {}
    for capture in (False, True):
        sim = Simulator(model, N, SimConfig(kappa=300.0), requires_grad=True, check_finite=False,
                        capture_graphs=capture)
        windows(sim, (2, 2))
        launches = []
        with intercepted_launches(lambda kernel, adjoint, threads, launch: (launches.append(kernel), launch())[1]):
            windows(sim, (2,))
        counts[capture] = len(launches)
    assert counts == {False: 2 * 2 * 4 * 13, True: 0}


def test_graphs_follow_a_new_dt_and_new_physics(models):
    """A new dt (captured again), and `vary` (stiffer contact, a heavier pelvis, less friction:
    written into the kernel model in place, which the graphs read): the captured simulator follows as
    the one that launches kernel by kernel does."""
    model = model_on(models, "cpu")
    config = SimConfig(kappa=300.0)
    varied = dataclasses.replace(config, kappa=600.0)
    mass = np.zeros(model.nb)
    mass[0] = 2.0
    variation = PhysicsVariation(body_mass_offset=mass, body_com_offset=np.zeros((model.nb, 3)), friction_scale=0.7)
    results = {}
    for capture in (False, True):
        sim = Simulator(model, N, config, requires_grad=True, capture_graphs=capture)
        first = windows(sim, (2, 2, 2))
        sim.vary(varied, variation)
        second = windows(sim, (2, 2, 2))
        results[capture] = first + second + windows(sim, (2, 2, 2), seed=1, dt=0.01)
    assert_identical(results[False], results[True])
    assert not np.array_equal(results[True][0][0], results[True][3][0])


@pytest.mark.parametrize("device", DEVICES)
def test_physics_redrawn_every_window_is_captured_once(models, monkeypatch, device):
    """Domain randomisation redraws the physics between windows (contact, masses, centres of mass,
    friction): the steps are captured once, in their forward pass (on a GPU a capture must not overlap
    the updates that run beside the backward pass), and every later window replays them with its own
    physics, bit-identical to launching kernel by kernel."""
    model = model_on(models, device)
    config = SimConfig(kappa=300.0)
    rng = np.random.default_rng(0)
    draws = [(dataclasses.replace(config, kappa=300.0 * rng.uniform(0.67, 1.5),
                                  contact_stabilization=rng.uniform(0.1, 0.4)),
              PhysicsVariation(body_mass_offset=np.eye(model.nb)[1] * rng.uniform(-1.0, 3.0),
                               body_com_offset=rng.uniform(-0.03, 0.03, (model.nb, 3)),
                               friction_scale=rng.uniform(0.6, 1.25))) for _ in range(5)]
    captures, in_backward = [], []
    scoped, backward = wp.ScopedCapture, CapturedStep.backward
    monkeypatch.setattr(wp, "ScopedCapture", lambda *a, **k: (captures.append(bool(in_backward)), scoped(*a, **k))[1])

    def watched_backward(step, mark):
        in_backward.append(1)
        try:
            backward(step, mark)
        finally:
            in_backward.pop()
    monkeypatch.setattr(CapturedStep, "backward", watched_backward)
    results = {}
    for capture in (False, True):
        sim = Simulator(model, N, config, requires_grad=True, check_finite=False, capture_graphs=capture)
        results[capture] = []
        for varied, variation in draws:
            sim.vary(varied, variation)
            results[capture] += windows(sim, (2,))
    assert_identical(results[False], results[True])
    # forward and backward graphs of both positions, once
    assert captures == [False] * 4
    assert not np.array_equal(results[True][-1][3], results[True][-2][3])


def test_vary_waits_for_the_backward_pass_and_reads_nothing_back(models, monkeypatch):
    """Taped steps whose backward pass is still to run would take it with the new physics: `vary`
    refuses until the segment is cut. It only copies to the device: no array is read back (on a
    GPU each read would wait for the device)."""
    model = model_on(models, "cpu")
    sim = Simulator(model, N, SimConfig(), requires_grad=True)
    kp, kd = pd(model, "cpu")
    q = torch.tensor(np.tile(model.default_qpos(0.80), (N, 1)))
    qd = torch.zeros(N, model.nv, dtype=torch.float64)
    step(sim, q, qd, torch.tensor(model.robot.default_q).expand(N, -1), DT, kp, kd)
    with pytest.raises(ValueError, match="4 taped substeps since the segment's last cut"):
        sim.vary(SimConfig(kappa=600.0), PhysicsVariation())
    sim.segment.cut()
    reads = []
    numpy = wp.array.numpy
    monkeypatch.setattr(wp.array, "numpy", lambda a: (reads.append(a.shape), numpy(a))[1])
    sim.vary(SimConfig(kappa=600.0), PhysicsVariation(body_mass_offset=np.eye(model.nb)[1], friction_scale=0.8))
    assert sim.config.kappa == 600.0
    assert reads == []


def test_a_captured_step_still_checks_its_result(models):
    """check_finite holds for replayed steps: a NaN state raises, naming the environment."""
    model = model_on(models, "cpu")
    sim = Simulator(model, N, SimConfig(), capture_graphs=True)
    kp, kd = pd(model, "cpu")
    q = torch.tensor(np.tile(model.default_qpos(0.80), (N, 1)))
    qd = torch.zeros(N, model.nv, dtype=torch.float64)
    target = torch.tensor(model.robot.default_q).expand(N, -1)
    step_without_gradient(sim, q, qd, target, DT, kp, kd)
    qd[1, 0] = float("nan")
    with pytest.raises(NonFiniteStateError, match=r"\[1\]"):
        step_without_gradient(sim, q, qd, target, DT, kp, kd)


def test_a_simulator_bundling_on_the_host_is_not_captured(models):
    model = model_on(models, "cpu")
    with pytest.raises(ValueError, match="bundling on the host cannot run as captured graphs"):
        Simulator(model, N, SimConfig(bundle=BundleConfig(enabled=True)), requires_grad=True, capture_graphs=True)


@pytest.mark.parametrize("device", DEVICES)
def test_device_bundled_windows_are_captured_and_match_steps_launched_one_by_one(models, device):
    """Bundling on the device (bundle.on_device): five windows, every robot restarted in each (closing
    what is open), bundles opened,
    refused, perturbed again and closed, launched kernel by kernel and captured (the first window
    launched, the second captured, the others replayed): states, gradients and counters equal to the
    last bit (on CUDA within 1e-9 relative, `assert_close`); a replayed window launches no kernel from
    Python. Without gradients too."""
    model = model_on(models, device)
    runs = {}
    for capture in (False, True):
        sim = Simulator(model, N, BUNDLED_ON_DEVICE, requires_grad=True, check_finite=False, capture_graphs=capture)
        out = windows(sim, (3, 3, 3, 3), restart=[0, 1, 2])
        launches = []
        with intercepted_launches(lambda kernel, adjoint, threads, launch: (launches.append(kernel), launch())[1]):
            out += windows(sim, (3,), seed=1, restart=[0, 1, 2])
        runs[capture] = (out, dataclasses.asdict(sim.bundle_stats), len(launches))
        assert sim.segment.pending_restarts == []       # every restart reached the device before its step
    same = assert_identical if device == "cpu" else assert_close
    same(runs[False][0], runs[True][0])
    assert runs[False][1] == runs[True][1]
    stats = runs[True][1]
    assert stats["bundles"] > 3 and stats["skipped_events"] > 0 and stats["reperturbations"] > 0, stats
    assert runs[False][2] > 0 and runs[True][2] == 0

    states = {}
    for capture in (False, True):
        sim = Simulator(model, N, BUNDLED_ON_DEVICE, capture_graphs=capture)
        q, qd = steps_without_gradient(sim, 8, fall_speed=0.8)
        sim.segment.cut()
        states[capture] = (q, qd, np.array(sim.bundle_stats.bundles))
    assert states[True][2] > 0
    same([states[False]], [states[True]])


def test_no_capture_allocates(models, monkeypatch):
    """Captures come after a position's first step and backward pass, which allocate what they need:
    on a GPU, memory allocated inside a capture would belong to the graph."""
    model = model_on(models, "cpu")
    allocator = wp.get_device("cpu").get_allocator()
    allocate = allocator.allocate
    during_capture = []

    def counted(size):
        if wp.get_device("cpu").is_capturing:
            during_capture.append(size)
        return allocate(size)

    monkeypatch.setattr(allocator, "allocate", counted)
    for requires_grad, config in ((True, SimConfig(kappa=300.0)), (False, SimConfig(kappa=300.0)),
                                  (True, BUNDLED_ON_DEVICE), (False, BUNDLED_ON_DEVICE)):
        sim = Simulator(model, N, config, requires_grad=requires_grad, capture_graphs=True)
        if requires_grad:
            windows(sim, (2, 2, 2))
        else:
            kp, kd = pd(model, "cpu")
            q = torch.tensor(np.tile(model.default_qpos(0.80), (N, 1)))
            qd = torch.zeros(N, model.nv, dtype=torch.float64)
            for _ in range(3):
                q, qd = step_without_gradient(sim, q, qd, torch.tensor(model.robot.default_q).expand(N, -1), DT, kp, kd)
    assert during_capture == []
