"""SHAC on the differentiable toy env: the actor loss falls on a fixed batch; non-finite updates are skipped."""
import copy

import pytest
import torch

from bcg_train.algo.data_parallel import Ranks
from bcg_train.algo.shac import Shac, fused_adam, gradient_norm, step_if_finite

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_shac(toy_env_class, tiny_config_factory):
    cfg = tiny_config_factory()
    torch.manual_seed(cfg.runner.seed)
    env = toy_env_class(num_envs=cfg.shac.num_envs)
    return Shac(env, cfg.shac, cfg.add, seed=cfg.runner.seed), env


def test_actor_loss_improves_on_a_fixed_batch(toy_env_class, tiny_config_factory, fixed_batch_loss):
    shac, env = make_shac(toy_env_class, tiny_config_factory)
    shac.set_learning_rates(0)
    loss_on_fixed_batch = fixed_batch_loss(shac, env)

    losses = []
    for _ in range(15):
        loss = loss_on_fixed_batch()
        losses.append(loss.item())
        metrics = shac.update_actor(loss)
        assert metrics["skipped/actor"] == 0.0
    losses.append(loss_on_fixed_batch().item())
    # the objective is -return per step; it must fall clearly, and mostly monotonically
    assert losses[-1] < losses[0] - 0.2 * abs(losses[0]), losses
    assert sum(b < a for a, b in zip(losses, losses[1:])) >= 12, losses


def test_gradient_flows_through_the_env_into_the_actor(toy_env_class, tiny_config_factory):
    shac, env = make_shac(toy_env_class, tiny_config_factory)
    loss, window = shac.rollout()
    loss.backward()
    first = shac.actor.net[0].weight.grad
    assert first is not None and torch.isfinite(first).all() and first.abs().sum() > 0
    assert shac.actor.log_std.grad.abs().sum() > 0
    assert window.obs.shape == (8, 8, env.obs_dim) and window.deltas.shape == (64, env.add_dim)
    assert all(p.grad is None for p in shac.target_critic.parameters())
    assert all(p.grad is None for p in shac.context.add.disc.parameters())


def test_non_finite_actor_loss_skips_the_update(toy_env_class, tiny_config_factory):
    shac, env = make_shac(toy_env_class, tiny_config_factory)
    before = [p.detach().clone() for p in shac.actor.parameters()]
    loss, _ = shac.rollout()
    metrics = shac.update_actor(loss * float("nan"))
    assert metrics["skipped/actor"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, shac.actor.parameters()))


def test_iteration_reports_named_reward_terms_and_trains_everything(toy_env_class, tiny_config_factory):
    shac, env = make_shac(toy_env_class, tiny_config_factory)
    critic_before = [p.detach().clone() for p in shac.critic.parameters()]
    target_before = [p.detach().clone() for p in shac.target_critic.parameters()]
    metrics = shac.iteration(0)
    for key in ("reward/add", "reward/effort", "reward/total", "loss/actor", "loss/critic", "add/loss",
                "env/env_steps_total", "lr/actor", "lr/critic", "skipped/critic"):
        assert key in metrics, key
    assert abs(metrics["reward/add"] + metrics["reward/effort"] - metrics["reward/total"]) < 1e-5
    assert metrics["lr/actor"] == 5e-3 and metrics["skipped/critic"] == 0.0
    assert not any(torch.equal(a, b) for a, b in zip(critic_before, shac.critic.parameters()))
    # Polyak 0.995: the target moved by 0.5 % of the way to the critic
    for t0, t1, c in zip(target_before, shac.target_critic.parameters(), shac.critic.parameters()):
        torch.testing.assert_close(t1, t0 + 0.005 * (c - t0))
    assert shac.obs_normalizer.count.item() == 64


def test_non_finite_gradient_skips_the_step_and_a_finite_one_is_clipped():
    layer = torch.nn.Linear(2, 1)
    optimizer = fused_adam(layer.parameters(), 0.1, (0.9, 0.99))
    params = list(layer.parameters())
    before = [p.detach().clone() for p in params]
    layer(torch.tensor([[1.0, float("inf")]])).sum().backward()
    taken = step_if_finite(torch.tensor(0.0), params, gradient_norm(params), 1.0, optimizer)
    assert not taken
    assert all(torch.equal(a, b) for a, b in zip(before, params))
    assert all(int(optimizer.state[p]["step"]) == 0 for p in params)   # the skipped step is not counted

    optimizer.zero_grad()
    (100.0 * layer(torch.tensor([[1.0, 2.0]]))).sum().backward()
    norm = gradient_norm(params)
    assert norm > 1.0
    assert step_if_finite(torch.tensor(0.0), params, norm, 1.0, optimizer)
    torch.testing.assert_close(gradient_norm(params), torch.tensor(1.0))   # clipped before the step
    assert all(int(optimizer.state[p]["step"]) == 1 for p in params)
    assert not any(torch.equal(a, b) for a, b in zip(before, params))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("algorithm", ["shac", "ppo"])
def test_runs_unchanged_on_cuda(algorithm, toy_env_class, tiny_config_factory):
    from bcg_train.runner import make_algorithm
    alg = make_algorithm(toy_env_class(num_envs=8, device="cuda:0"), tiny_config_factory(algorithm))
    metrics = alg.iteration(0)
    assert all(isinstance(v, float) for v in metrics.values())
    state = alg.state_dict()
    alg.load_state_dict(state)
    alg.iteration(1)


def test_a_diverged_failed_state_does_not_poison_the_update(toy_env_class, tiny_config_factory):
    class Diverging(toy_env_class):
        """Failed episodes report a NaN observation (still attached to the state's graph), as a
        simulator that blew up would."""
        def step(self, actions):
            step = super().step(actions)
            step.obs_before_reset = step.obs_before_reset + torch.where(step.terminated[:, None], float("nan"), 0.0)
            return step

    cfg = tiny_config_factory()
    torch.manual_seed(0)
    env = Diverging(num_envs=8, fail_distance=0.05)
    shac = Shac(env, cfg.shac, cfg.add, seed=0)
    loss, window = shac.rollout()
    assert window.terminated.any()
    metrics = shac.update_actor(loss)
    assert metrics["skipped/actor"] == 0.0 and all(torch.isfinite(p).all() for p in shac.actor.parameters())


def test_load_networks_reproduces_the_policy_and_rewards_without_touching_optimisers_or_env(toy_env_class,
                                                                                           tiny_config_factory):
    trained, env = make_shac(toy_env_class, tiny_config_factory)
    for it in range(2):
        trained.iteration(it)
    fresh, fresh_env = make_shac(toy_env_class, tiny_config_factory)
    optimizer_before = copy.deepcopy(fresh.actor_optimizer.state_dict())
    obs = torch.randn(5, env.obs_dim)
    assert not torch.allclose(fresh.policy()(obs), trained.policy()(obs))
    fresh.load_networks(trained.state_dict())
    torch.testing.assert_close(fresh.policy()(obs), trained.policy()(obs))
    torch.testing.assert_close(fresh.target_critic.value(fresh.obs_normalizer(obs)),
                               trained.target_critic.value(trained.obs_normalizer(obs)))
    step = env.step(torch.zeros(env.num_envs, env.act_dim))
    torch.testing.assert_close(fresh.context.add.reward(step.add_sim, step.add_ref),
                               trained.context.add.reward(step.add_sim, step.add_ref))
    assert fresh.actor_optimizer.state_dict() == optimizer_before


def test_networks_trained_on_fewer_observation_entries_act_as_before_with_entries_appended():
    from bcg_train.algo.networks import CriticEnsemble, GaussianActor, with_inputs_appended
    from bcg_train.algo.obs_normalizer import RunningObsNormalizer
    torch.manual_seed(0)
    actor, critic, norm = GaussianActor(5, 3, [8, 8], 0.5), CriticEnsemble(5, [8], 2), RunningObsNormalizer(5)
    norm.update(torch.randn(50, 5) * 3 + 1, Ranks())
    wide_actor, wide_critic, wide_norm = GaussianActor(7, 3, [8, 8], 1.0), CriticEnsemble(7, [8], 2), \
        RunningObsNormalizer(7)
    wide_actor.load_state_dict(with_inputs_appended(actor.state_dict(), 7))
    wide_critic.load_state_dict(with_inputs_appended(critic.state_dict(), 7))
    wide_norm.load_with_entries_appended(norm.state_dict())
    obs = torch.randn(4, 7) * 2
    torch.testing.assert_close(wide_actor(wide_norm(obs)), actor(norm(obs[:, :5])))
    torch.testing.assert_close(wide_critic(wide_norm(obs)), critic(norm(obs[:, :5])))
    torch.testing.assert_close(wide_norm.var[5:], torch.ones(2, dtype=torch.float64))
    assert wide_actor.net[0].weight.shape == (8, 7) and not wide_actor.net[0].weight[:, 5:].any()


def test_the_actor_is_held_then_ramps_up_to_its_schedule(toy_env_class, tiny_config_factory):
    """Warm-up 2, ramp 3: the actor's rate is 0, 0, then 1/4, 2/4, 3/4 of the schedule, then the
    schedule itself; the critics follow theirs throughout. Without a ramp it starts at full rate."""
    import dataclasses

    from bcg_train.algo.shac import linear_decay
    shac, _ = make_shac(toy_env_class, tiny_config_factory)
    cfg = shac.cfg = dataclasses.replace(shac.cfg, iterations=20, actor_warmup_iterations=2, actor_ramp_iterations=3)
    schedule = [linear_decay(cfg.actor_lr, cfg.final_lr, it, cfg.iterations) for it in range(8)]
    rates = [shac.set_learning_rates(it) for it in range(8)]
    expected = [0, 0, 0.25, 0.5, 0.75, 1, 1, 1]
    assert [r["lr/actor"] for r in rates] == pytest.approx([f * s for f, s in zip(expected, schedule)])
    assert all(g["lr"] == rates[-1]["lr/actor"] for g in shac.actor_optimizer.param_groups)
    assert rates[0]["lr/critic"] == pytest.approx(linear_decay(cfg.critic_lr, cfg.final_lr, 0, cfg.iterations))
    shac.cfg = dataclasses.replace(cfg, actor_ramp_iterations=0)
    assert [shac.set_learning_rates(it)["lr/actor"] for it in (1, 2)] == pytest.approx([0, schedule[2]])
