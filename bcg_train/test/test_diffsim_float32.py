"""The float32 simulator (`Model.from_mujoco(..., precision="float32")`) against the float64 one: the
same physics from the same state, trajectories and window gradients (kappa 300, with and without
bundling) within float32's rounding; one import of every module serves both precisions (one class of
each, the Warp code built per precision), and a model and a configuration of different precisions do
not mix unnoticed; the torch bridge and the imitation environment run in float32 end to end.

Measured when written (4 environments standing 2 mm above the floor, random PD targets, kappa 300):
state error (max over q) 3.5e-6 at 0.2 s (5e-5 bundled), at most 1.1e-3 within 1 s; gradient of a
weighted final q wrt the targets 3.6e-4 relative over 5 control steps and 2.3e-3 over 20 (7e-3 with
bundling).
"""
import sys

import numpy as np
import pytest
import torch
import warp as wp

from bcg.config_check import ConfigError
from bcg_train.diffsim import BundleConfig, Model, SimConfig, Simulator, Tape, torch_bridge
from bcg_train.diffsim.kernels.dynamics import DynamicsKernels

N = 4
DT = 0.02
PRECISIONS = ("float64", "float32")


@pytest.fixture(scope="module")
def models():
    return {p: Model.from_mujoco(device="cpu", precision=p) for p in PRECISIONS}


def rollout(models, precision, steps, bundle=False, grad=False, device="cpu"):
    """Final q (N, nq) as float64, each step's q, and with `grad` the gradient of w . q_final wrt the
    PD targets (N, nj), w fixed."""
    model = models[precision] if device == "cpu" else Model.from_mujoco(device=device, precision=precision)
    sim = Simulator(model, N, SimConfig(kappa=300.0, precision=precision, bundle=BundleConfig(enabled=bundle)),
                        requires_grad=grad)
    rng, r = np.random.default_rng(3), model.robot
    q0 = np.tile(model.default_qpos(r.standing_height + 0.002), (N, 1))
    q0[:, 7:] += rng.normal(0, 0.05, (N, model.nq - 7))
    ctrl = sim.control().set_pd(q_target=np.tile(r.default_q, (N, 1)) + rng.normal(0, 0.1, (N, model.nj)),
                                kp=r.kp, kd=r.kd)
    s = sim.state().assign(q0, np.zeros(model.nv))
    tape = Tape()
    trajectory = []
    with tape:
        for _ in range(steps):
            s_next = sim.state()
            sim.step(s, s_next, ctrl, DT)
            s = s_next
            if not grad:
                trajectory.append(s.q.numpy().astype(np.float64))
    if not grad:
        return s.q.numpy().astype(np.float64), trajectory, None
    w = np.random.default_rng(5).normal(size=(N, model.nq))
    tape.backward(grads={s.q: wp.array(w, dtype=s.q.dtype)})
    return s.q.numpy().astype(np.float64), trajectory, ctrl.q_target.grad.numpy().astype(np.float64)


def test_one_import_serves_both_precisions(models):
    """No module is loaded twice: one Model, Simulator and SimConfig class for both precisions, every
    diffsim module from its own file once; the float32 model's arrays and states are float32, and the
    Warp kernels are built per precision, once each."""
    assert not [name for name in sys.modules if name.startswith("bcg_train.diffsim_")]
    loaded = [m for name, m in sys.modules.items() if name.startswith("bcg_train.diffsim") and m is not None]
    files = [getattr(m, "__file__", None) for m in loaded]
    assert len(files) == len(set(files)), sorted(files)
    m32, m64 = models["float32"], models["float64"]
    assert type(m32) is type(m64) is Model and (m32.precision, m64.precision) == ("float32", "float64")
    sims = {p: Simulator(models[p], 1, SimConfig(precision=p)) for p in PRECISIONS}
    assert type(sims["float32"]) is type(sims["float64"]) is Simulator
    assert type(sims["float32"].config) is type(sims["float64"].config) is SimConfig
    assert m32.body_mass.dtype is wp.float32 and m32.body_pos.dtype is wp.vec3f and m32.body_inertia.dtype is wp.mat33f
    assert m64.body_mass.dtype is wp.float64 and m64.body_pos.dtype is wp.vec3d
    state = sims["float32"].state()
    assert state.q.dtype is wp.float32 and state.contact_impulse.dtype is wp.vec3f
    assert sims["float32"].control().q_target.dtype is wp.float32
    assert np.allclose(m32.body_mass.numpy(), m64.body_mass.numpy(), rtol=1e-7)
    k32, k64 = (DynamicsKernels.of(models[p].types) for p in ("float32", "float64"))
    assert k32 is DynamicsKernels.of(m32.types) and k32.kinematics is not k64.kinematics
    assert k32.kinematics.key == k64.kinematics.key == "kinematics"
    assert sims["float32"].physics.dk is k32 and sims["float64"].physics.dk is k64


def test_precisions_do_not_mix(models):
    with pytest.raises(ValueError, match=r"^the model is float64, the configuration float32: build the model with "
                                         r"Model.from_mujoco\(\.\.\., precision='float32'\)"):
        Simulator(models["float64"], 1, SimConfig(precision="float32"))
    with pytest.raises(ValueError, match="the model is float32, the configuration float64"):
        Simulator(models["float32"], 1, SimConfig())
    with pytest.raises(ConfigError, match=r"^precision='float16': not one of the choices; "
                       r"expected one of 'float64', 'float32'$"):
        SimConfig(precision="float16").validate()
    with pytest.raises(ConfigError, match="^precision='float16': not one of the choices"):
        Model.from_mujoco(device="cpu", precision="float16")


@pytest.mark.parametrize("bundle", [False, True], ids=["plain", "bundled"])
def test_float32_follows_float64_over_one_second_with_contact(models, bundle):
    q64, traj64, _ = rollout(models, "float64", 50, bundle)
    q32, traj32, _ = rollout(models, "float32", 50, bundle)
    errors = [np.abs(a - b).max() for a, b in zip(traj64, traj32)]
    assert errors[9] < 2e-4 and max(errors) < 5e-3, errors
    assert np.abs(q64 - traj64[0]).max() > 0.05         # the robots moved (a check that can fail)


@pytest.mark.parametrize("steps, bound", [(5, 3e-3), (20, 2e-2)])
@pytest.mark.parametrize("bundle", [False, True], ids=["plain", "bundled"])
def test_float32_window_gradients_match_float64(models, steps, bound, bundle):
    _, _, g64 = rollout(models, "float64", steps, bundle, grad=True)
    _, _, g32 = rollout(models, "float32", steps, bundle, grad=True)
    rel = np.linalg.norm(g32 - g64) / np.linalg.norm(g64)
    assert np.linalg.norm(g64) > 1.0 and rel < bound, rel


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_float32_on_cuda_follows_float64_on_the_cpu(models):
    _, _, g64 = rollout(models, "float64", 5, grad=True)
    _, _, g32 = rollout(models, "float32", 5, grad=True, device="cuda:0")
    _, traj64, _ = rollout(models, "float64", 50)
    _, traj32, _ = rollout(models, "float32", 50, device="cuda:0")
    errors = [np.abs(a - b).max() for a, b in zip(traj64, traj32)]
    assert errors[9] < 2e-4 and max(errors) < 5e-3, errors
    assert np.linalg.norm(g32 - g64) / np.linalg.norm(g64) < 3e-3


def test_torch_bridge_runs_in_the_simulators_precision(models):
    model = models["float32"]
    sim = Simulator(model, 2, SimConfig(precision="float32"), requires_grad=True)
    r = model.robot
    q = torch.tensor(np.tile(model.default_qpos(r.standing_height), (2, 1)))             # float64 in
    target = torch.tensor(np.tile(r.default_q, (2, 1)), requires_grad=True)
    q1, qd1 = torch_bridge.step(sim, q, torch.zeros(2, model.nv, dtype=torch.float64), target, DT,
                                torch.tensor(r.kp), torch.tensor(r.kd))
    assert q1.dtype == torch.float32 and qd1.dtype == torch.float32
    (q1.sum() + qd1.sum()).backward()
    assert target.grad.dtype == torch.float64 and torch.isfinite(target.grad).all() and target.grad.abs().sum() > 0


def test_the_imitation_env_trains_through_the_float32_simulator():
    """`env.sim.precision: float32`: states, rewards and ADD features in float32, gradients through a
    bundled window to the actions, with domain randomisation (gains, delays, the physics draw), as in
    float64."""
    import dataclasses

    from bcg_train.imitation.config import ImitationEnvConfig
    from bcg_train.imitation.env import G1ImitationEnv
    base = ImitationEnvConfig()
    cfg = dataclasses.replace(base, sim=SimConfig(precision="float32", bundle=BundleConfig(enabled=True, branches=2)),
                              randomization=dataclasses.replace(base.randomization, enabled=True))
    env = G1ImitationEnv(cfg, "synthetic_jump", 3, "cpu", seed=5)
    assert env.model.precision == "float32" and env.sim.model is env.model
    obs = env.reset()
    actions = torch.full((3, env.act_dim), 0.1, requires_grad=True)
    total = 0.0
    for _ in range(3):
        step = env.step(actions)
        total = total + step.add_sim.sum() + step.reward_terms["action_rate"].sum()
    total.backward()
    env.cut_graph()
    assert obs.dtype == torch.float32 and env.q.dtype == torch.float32 and step.add_sim.dtype == torch.float32
    assert env.randomizer.physics and env.sim.config.precision == "float32"    # a physics draw was applied
    assert torch.isfinite(actions.grad).all() and actions.grad.abs().sum() > 0
