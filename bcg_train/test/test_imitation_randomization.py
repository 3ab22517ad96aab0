"""Domain randomisation of the G1 imitation environment and the simulator's physics variation:
what each randomisation does, that physics changes only between gradient segments, exact resume,
the contract's record, and clear errors."""
import dataclasses

import numpy as np
import pytest
import torch

from bcg.config_check import ConfigError
from bcg_train.diffsim import PhysicsVariation, SimConfig, Simulator
from bcg_train.imitation.config import ImitationEnvConfig, RandomizationConfig
from bcg_train.imitation.env import G1ImitationEnv
from bcg_train.train_config import TrainConfig, apply_overrides

N = 3


def make(**randomization):
    rand = RandomizationConfig(enabled=True, **randomization)
    cfg = ImitationEnvConfig(sim=SimConfig(), randomization=rand, termination_body_error=100.0)
    return G1ImitationEnv(cfg, "synthetic_jump", N, "cpu", seed=4)


def standing(model, sim, steps=10, variation=None):
    """Pelvis height after `steps` control steps of PD standing from 2 cm up."""
    if variation is not None:
        sim.vary(sim.config, variation)
    r = model.robot
    s0, s1 = sim.state().assign(model.default_qpos(0.78)), sim.state()
    ctrl = sim.control().set_pd(q_target=r.default_q, kp=r.kp * 10, kd=r.kd * 3)
    for _ in range(steps):
        sim.step(s0, s1, ctrl, 0.02)
        s0, s1 = s1, s0
    return s0.q.numpy()[0]


def test_a_physics_variation_changes_one_simulator_and_not_the_model(model):
    mass_before = model.body_mass.numpy().copy()
    nominal = standing(model, Simulator(model, 1))
    payload = np.zeros(model.nb)
    payload[model.body_names.index("torso_link")] = 8.0
    heavy = standing(model, Simulator(model, 1), variation=PhysicsVariation(body_mass_offset=payload))
    assert heavy[2] < nominal[2] - 1e-4                        # the PD gives way under 8 kg more
    np.testing.assert_array_equal(model.body_mass.numpy(), mass_before)
    again = standing(model, Simulator(model, 1))
    np.testing.assert_array_equal(again, nominal)


def test_variations_refuse_what_would_resize_the_simulator_or_is_not_physical(model):
    sim = Simulator(model, 1)
    with pytest.raises(ValueError, match="substeps: a varied simulator keeps 4"):
        sim.vary(dataclasses.replace(sim.config, substeps=2), PhysicsVariation())
    with pytest.raises(ValueError, match="precision: a varied simulator keeps 'float64'"):
        sim.vary(dataclasses.replace(sim.config, precision="float32"), PhysicsVariation())
    with pytest.raises(ValueError, match="body_mass_offset: would make a body's mass <= 0"):
        sim.vary(sim.config, PhysicsVariation(body_mass_offset=-100.0 * np.ones(model.nb)))
    with pytest.raises(ValueError, match="friction_scale: must be > 0"):
        sim.vary(sim.config, PhysicsVariation(friction_scale=0.0))


def test_physics_is_redrawn_only_between_gradient_segments():
    env = make(physics_every_steps=2)
    env.reset()
    a = torch.zeros(N, env.act_dim, requires_grad=True)
    env.step(a)                                      # draws (due at the start), then tapes
    def physics():
        mdl = env.sim.physics.kernel_model
        return mdl.solver.numpy().copy(), mdl.body_mass.numpy().copy(), mdl.sphere_friction.numpy().copy()
    first = physics()
    for _ in range(4):                               # due again after 2 steps, but the segment is open
        env.step(a)
    assert all(np.array_equal(x, y) for x, y in zip(physics(), first))
    env.cut_graph()
    env.step(a)
    assert not any(np.array_equal(x, y) for x, y in zip(physics(), first))
    assert env.sim.config.kappa == env.sim_plain.config.kappa != SimConfig().kappa
    assert env.sim_plain.physics.variation == env.sim.physics.variation


def test_a_taped_window_with_restarts_and_pushes_backpropagates():
    """Episodes end inside the window (3-step episodes) and pushes land: the per-environment draws
    must not change tensors the window's graph saved."""
    rand = RandomizationConfig(enabled=True, push_interval_s=(0.02, 0.02))
    env = G1ImitationEnv(ImitationEnvConfig(randomization=rand, episode_length_s=0.06), "synthetic_jump", N, "cpu",
                         seed=2)
    env.reset()
    a = torch.zeros(N, env.act_dim, requires_grad=True)
    loss = sum(env.step(a * (t + 1)).add_sim.sum() for t in range(7))
    loss.backward()
    assert torch.isfinite(a.grad).all() and a.grad.abs().sum() > 0 and env.randomizer.pushes > 0


def test_an_action_delay_of_one_step_applies_the_previous_action():
    delayed, plain = make(action_delay_steps=(1, 1), push_velocity=0.0), make(action_delay_steps=(0, 0),
                                                                               push_velocity=0.0)
    for env in (delayed, plain):
        env.reset()
    plain.load_state_dict({**delayed.state_dict(), "history": plain.state_dict()["history"],
                           "randomizer": {**delayed.state_dict()["randomizer"],
                                          "delay": torch.zeros(N, dtype=torch.long)}})
    first, second = torch.full((N, 29), 0.2), torch.full((N, 29), -0.3)
    with torch.no_grad():
        delayed.step(first)
        delayed.step(second)
        plain.step(torch.zeros(N, 29))              # the delayed env applied nothing (zero history) first
        plain.step(first)
    np.testing.assert_allclose(delayed.q.numpy(), plain.q.numpy(), atol=1e-6)


def test_pushes_kick_the_base_horizontally_within_the_configured_speed():
    env = make(push_interval_s=(0.02, 0.02), push_velocity=0.5)
    env.reset()
    qd = env.qd.clone()
    kicked, idx = env.randomizer.push(qd, env.steps + 1)
    assert len(idx) == N and env.randomizer.pushes == N and idx.device.type == "cpu"
    dv = (kicked - qd)[:, :3]
    assert (dv[:, 2] == 0).all() and (dv[:, :2].norm(dim=1) <= 0.5 + 1e-12).all() and dv.abs().sum() > 0


def test_a_randomised_environment_resumes_bit_exactly():
    env = make(physics_every_steps=2, push_interval_s=(0.06, 0.1))
    env.reset()
    actions = [0.1 * torch.sin(torch.arange(N * 29, dtype=torch.float32).reshape(N, 29) + t) for t in range(8)]
    for t in range(4):
        env.step(actions[t])
        env.cut_graph()
    saved = env.state_dict()
    continued = [env.step(a).obs.detach() for a in actions[4:]]
    resumed = make(physics_every_steps=2, push_interval_s=(0.06, 0.1))
    resumed.load_state_dict(saved)
    for x, a in zip(continued, actions[4:]):
        assert torch.equal(x, resumed.step(a).obs.detach())


def test_pushes_and_time_limits_are_decided_without_asking_the_device():
    """With randomisation on, a step asks the device one question (which environments are done;
    plus the simulator's non-finite check where it is on), with or without restarts: the push timers
    and episode step counters are on the host. (The counter counts every tensor-to-host conversion, so
    on the CPU it also counts one conversion of host-side indices: the restarted environments' handed
    to the simulator's segment, or a push's: no push is due in the steps measured.)"""
    from bcg_train.algo.phases import PhaseTimer, count_host_syncs, phase
    env = make(physics_every_steps=100)
    env.reset()
    with PhaseTimer() as timer, count_host_syncs(timer):
        for name in ("first step: physics drawn", "step"):
            with phase(name):
                step = env.step(torch.zeros(N, 29, requires_grad=True))
        assert not (step.terminated | step.truncated).any() and env.randomizer.pushes == 0
        env.steps[:2] = env.max_steps - 1           # two environments run out of time in the next step
        with phase("step with restarts"):
            step = env.step(torch.zeros(N, 29, requires_grad=True))
    assert step.truncated[:2].all() and not step.truncated[2:].any() and env.randomizer.pushes == 0
    assert (env.steps[:2] == 0).all()
    assert timer.syncs["step"] == 1 + env.sim.check_finite
    assert timer.syncs["step with restarts"] == 1 + env.sim.check_finite + 1
    assert env.steps.device.type == env.randomizer.next_push.device.type == "cpu"


def test_the_contract_records_the_randomisation_and_the_log_its_draws():
    env = make()
    env.reset()
    step = env.step(torch.zeros(N, 29))
    contract = env.policy_contract()
    assert contract.randomization["enabled"] is True and contract.randomization["kp_scale"] == [0.85, 1.15]
    assert {"pushes", "dr_kappa_scale", "dr_friction_scale", "dr_payload_mass"} <= set(step.counters)


def test_bad_randomisation_settings_name_the_key():
    with pytest.raises(ConfigError, match=r"^env\.randomization\.kp_scale=\[1\.2, 0\.8\]: low > high; "
                       r"expected a list of 2 numbers \[low, high\] with low <= high, each > 0$"):
        apply_overrides(TrainConfig(), {"env": {"randomization": {"kp_scale": [1.2, 0.8]}}}).validate()
    with pytest.raises(ConfigError, match=r"^env\.randomization\.physics_every_steps=0: too small; "
                       r"expected an integer >= 1$"):
        apply_overrides(TrainConfig(), {"env": {"randomization": {"physics_every_steps": 0}}}).validate()
    with pytest.raises(ValueError, match="payload_body: 'head' is not a body of the model"):
        make(payload_body="head")
