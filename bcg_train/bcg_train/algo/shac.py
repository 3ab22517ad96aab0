"""SHAC: short-horizon actor-critic through a differentiable simulator (Xu et al. 2022), with ADD.

One iteration:
1. Actor: roll the stochastic policy (reparameterised) `horizon` steps through the env, keeping the
   autograd graph; loss = -sum_envs `window_returns` / (horizon * num_envs) (DiffRL's scaling),
   where the window return bootstraps with the target critic (0 after a termination, the value of
   the pre-reset state after a time-out or at the window's end); backpropagate through the
   simulator, clip the gradient norm, Adam step. A non-finite loss or gradient skips the step.
2. Critic ensemble: regress TD(lambda) targets (target critic values) over the window's
   observations, `critic_iterations` passes of `critic_minibatches` minibatches; non-finite
   minibatches are skipped. Then target <- polyak * target + (1 - polyak) * critic.
3. Observation normaliser and ADD discriminator updates on the window's data.
The env's graph is cut after the actor update: no gradient flows between windows.
Steps 2 and 3's critic and discriminator updates run in a second thread while the actor's loss is
backpropagated through the simulator (`concurrent_updates`: same result as one after the other); the
target critic and the normaliser are updated after both, as the backward pass reads them.
Learning rates decay linearly from their initial values to `final_lr` over the run.

How it runs: the rewards and target values of a window are computed once for all its steps after
the rollout (batched); optimisers are fused and skip non-finite steps on the device; the iteration's
metrics reach the host in one transfer (no other host synchronisation here). With several ranks
(`data_parallel`) the gradients and statistics are averaged over them.
"""
import copy
import math
from dataclasses import dataclass
from typing import Dict, List, Tuple

import torch
from torch import Tensor, nn

from bcg.config_check import FRACTION, LAYERS, NON_NEGATIVE, POSITIVE, Settings, between, check, setting

from ..env_api import DiffEnv, EnvStep
from .add import AddConfig
from .concurrent_updates import UpdateThread
from .data_parallel import Metric, Ranks
from .gradient_stats import GradientStats
from .imitation_context import ImitationContext
from .networks import CriticEnsemble, GaussianActor, with_inputs_appended
from .obs_normalizer import RunningObsNormalizer
from .phases import phase
from .returns import td_lambda_targets, window_returns
from .reward import total_reward

POLICY_NORMALIZER_COUNT = 1e6
"""Observations the normaliser of a run started from a policy file counts as seen (the file keeps
the statistics, not their count): enough that the first windows move them little."""


@dataclass
class ShacConfig(Settings):
    """SHAC (Xu et al. 2022) with the BCG paper's settings."""

    num_envs: int = setting(64, POSITIVE)
    """Parallel environments when bundling is on."""
    num_envs_without_bundle: int = setting(128, POSITIVE)
    """Parallel environments with `--no-bundle` (the paper doubles them)."""
    horizon: int = setting(32, POSITIVE)
    """Control steps per window (gradients are cut between windows)."""
    iterations: int = setting(3000, POSITIVE)
    """Windows (= actor updates) in a run."""
    gamma: float = setting(0.99, FRACTION)
    """Discount per control step."""
    lam: float = setting(0.95, FRACTION)
    """TD(lambda) mixing of the critic targets."""
    actor_lr: float = setting(5e-3, POSITIVE)
    """Actor Adam learning rate at iteration 0, decaying linearly to `final_lr`."""
    critic_lr: float = setting(2e-3, POSITIVE)
    """Critic Adam learning rate at iteration 0, decaying linearly to `final_lr`."""
    final_lr: float = setting(1e-5, POSITIVE)
    """Learning rate both reach at the last iteration."""
    betas: Tuple[float, float] = setting((0.7, 0.95), between(0, 1, high_open=True))
    """Adam betas of actor and critic."""
    actor_grad_clip: float = setting(1.0, POSITIVE)
    """Global gradient-norm clip of the actor."""
    critic_grad_clip: float = setting(10.0, POSITIVE)
    """Global gradient-norm clip of the critic ensemble."""
    critic_iterations: int = setting(16, POSITIVE)
    """Passes over a window's samples per critic update."""
    critic_minibatches: int = setting(4, POSITIVE)
    """Minibatches per pass."""
    target_polyak: float = setting(0.995, FRACTION)
    """Target critic <- polyak * target + (1 - polyak) * critic, once per iteration."""
    actor_hidden: Tuple[int, ...] = setting((512, 256, 128), LAYERS)
    """Actor MLP hidden widths (Linear, ELU, LayerNorm each)."""
    critic_hidden: Tuple[int, ...] = setting((256, 256), LAYERS)
    """Critic MLP hidden widths, per ensemble member."""
    critic_ensemble: int = setting(3, POSITIVE)
    """Critics in the ensemble; bootstraps take their minimum."""
    init_action_std: float = setting(1.0, POSITIVE)
    """Initial standard deviation of the Gaussian policy (raw action units)."""
    grad_stats_window: int = setting(10, POSITIVE)
    """Actor updates over which the logged gradient statistics average ('grad/', see `gradient_stats`)."""
    actor_warmup_iterations: int = setting(0, NON_NEGATIVE)
    """Iterations at the start in which the actor's learning rate is 0 while the critics and the ADD
    discriminator learn: for a run started from a policy file, whose critics and discriminator
    are new (`--init-from POLICY.onnx`); then the rate follows its schedule, as if never held."""
    actor_ramp_iterations: int = setting(0, NON_NEGATIVE)
    """Iterations after the warm-up over which the actor's learning rate rises linearly from 0 to its
    schedule (0: at once). A fine-tuned actor meets critics that have only just learnt; its first full-rate
    updates can undo its balance (a dance fine-tune fell at 0.9 s 50 iterations after its warm-up)."""

    def check_relations(self) -> None:
        check(self.actor_warmup_iterations < self.iterations, "actor_warmup_iterations", self.actor_warmup_iterations,
              f"leaves no actor update in {self.iterations} iterations", "fewer than iterations")
        samples = self.num_envs * self.horizon
        check(samples >= self.critic_minibatches, "critic_minibatches", self.critic_minibatches,
              f"more minibatches than the window's num_envs * horizon = {samples} samples", f"at most {samples}")


def linear_decay(start: float, end: float, iteration: int, iterations: int) -> float:
    """start at iteration 0, moving linearly towards end at `iterations` (DiffRL's schedule)."""
    return start + (end - start) * iteration / iterations


def fused_adam(params, lr: float, betas: Tuple[float, float]) -> torch.optim.Adam:
    """Adam as one fused kernel per step (no per-parameter host reads of the step count)."""
    return torch.optim.Adam(params, lr=lr, betas=betas, fused=True)


def step_if_finite(loss: Tensor, params: List[nn.Parameter], norm: Tensor, clip: float,
                   optimizer: torch.optim.Optimizer) -> Tensor:
    """Scale the gradients of `params` (total norm `norm`) down to norm `clip` at most and step, unless
    the loss or the norm is not finite. The decision stays on the device: a fused optimizer skips the
    step when its `found_inf` is 1 (the gradients are left for the next `zero_grad`). Returns whether
    the step was taken (bool tensor)."""
    finite = torch.isfinite(loss) & torch.isfinite(norm)
    nn.utils.clip_grads_with_norm_(params, clip, norm)
    optimizer.found_inf = (~finite).float()
    optimizer.step()
    return finite


def gradient_norm(params: List[nn.Parameter]) -> Tensor:
    """The total 2-norm of the gradients of `params` (those that have one)."""
    return nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])


def stack_steps(steps: List[EnvStep]) -> EnvStep:
    """Consecutive steps as one `EnvStep` whose tensors have a leading time axis (T, N, ...); the
    counters are the last step's."""
    last = steps[-1]
    return EnvStep(obs=torch.stack([s.obs for s in steps]),
                   reward_terms={k: torch.stack([s.reward_terms[k] for s in steps]) for k in last.reward_terms},
                   add_sim=torch.stack([s.add_sim for s in steps]), add_ref=torch.stack([s.add_ref for s in steps]),
                   terminated=torch.stack([s.terminated for s in steps]),
                   truncated=torch.stack([s.truncated for s in steps]),
                   obs_before_reset=torch.stack([s.obs_before_reset for s in steps]), counters=last.counters,
                   fell=None if last.fell is None else torch.stack([s.fell for s in steps]))


def bootstrap_obs(step: EnvStep) -> Tensor:
    """The observations to value after `step`: the pre-reset ones, zeros where the episode failed
    (their value is not used, and a diverged failed state must not put NaN into the gradient)."""
    failed = step.terminated[..., None]
    return torch.where(failed, torch.zeros_like(step.obs_before_reset), step.obs_before_reset)


class DeterministicPolicy(nn.Module):
    """Raw observation (B, obs_dim) -> mean action (B, act_dim): the normaliser then the actor's mean."""

    def __init__(self, normalizer: RunningObsNormalizer, actor: GaussianActor):
        super().__init__()
        self.normalizer, self.actor = normalizer, actor

    def forward(self, obs: Tensor) -> Tensor:
        return self.actor(self.normalizer(obs))


def build_networks(cfg: ShacConfig, obs_dim: int, act_dim: int):
    """(actor, critic ensemble, observation normaliser) on the CPU, freshly initialised."""
    return (GaussianActor(obs_dim, act_dim, cfg.actor_hidden, cfg.init_action_std),
            CriticEnsemble(obs_dim, cfg.critic_hidden, cfg.critic_ensemble),
            RunningObsNormalizer(obs_dim))


def deployable_policy(state: dict, cfg: ShacConfig, obs_dim: int, act_dim: int) -> nn.Module:
    """The deterministic policy of a SHAC checkpoint's `algorithm` state, on the CPU."""
    actor, _, normalizer = build_networks(cfg, obs_dim, act_dim)
    actor.load_state_dict(state["actor"])
    normalizer.load_state_dict(state["obs_normalizer"])
    return DeterministicPolicy(normalizer, actor).eval()


@dataclass
class Window:
    """One rollout window, detached, for the critic and the discriminator. T steps, N envs."""

    obs: Tensor          # (T, N, obs_dim) normalised observations at the start of each step
    raw_obs: Tensor      # (T, N, obs_dim) the same, raw (for the normaliser)
    rewards: Tensor      # (T, N)
    next_values: Tensor  # (T, N) target-critic values of the pre-reset states
    terminated: Tensor   # (T, N) bool
    truncated: Tensor    # (T, N) bool
    deltas: Tensor       # (T * N, F) ADD deltas phi_ref - phi_sim


class Shac:
    """SHAC with an ADD reward on a `DiffEnv`; `iteration` runs one window and all updates."""

    name = "shac"

    def __init__(self, env: DiffEnv, cfg: ShacConfig, add: AddConfig, seed: int):
        self.env, self.cfg = env, cfg
        device = env.device
        self.ranks = Ranks()
        self.update_ranks = self.ranks.for_another_thread()
        """The critic's and the discriminator's collectives: they are issued from the update thread."""
        self.update_thread = UpdateThread()
        actor, critic, normalizer = build_networks(cfg, env.obs_dim, env.act_dim)
        self.actor, self.critic, self.obs_normalizer = actor.to(device), critic.to(device), normalizer.to(device)
        self.ranks.broadcast_([*self.actor.parameters(), *self.critic.parameters()])
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.context = ImitationContext(env, add, seed, self.update_ranks)
        self.actor_optimizer = fused_adam(self.actor.parameters(), self.cfg.actor_lr, self.cfg.betas)
        self.critic_optimizer = fused_adam(self.critic.parameters(), self.cfg.critic_lr, self.cfg.betas)
        self.grad_stats = GradientStats(sum(p.numel() for p in self.actor.parameters()), cfg.grad_stats_window,
                                        cfg.actor_grad_clip, device)
        self.obs = env.reset()

    @property
    def iterations(self) -> int:
        return self.cfg.iterations

    @property
    def env_steps_per_iteration(self) -> int:
        """Environment steps of all ranks together."""
        return self.cfg.horizon * self.env.num_envs * self.ranks.world_size

    def iteration(self, it: int) -> Dict[str, float]:
        """Run iteration `it` (0-based): window, actor, critic, target, discriminator, normaliser."""
        metrics: Dict[str, Metric] = self.set_learning_rates(it)
        with phase("rollout"):
            loss, window = self.rollout()
        updates, actor = self.update_thread.run_beside(lambda: self.update_critic_and_discriminator(window),
                                                       lambda: self.update_actor(loss))
        metrics.update(actor)
        metrics.update(updates)
        with phase("target update"):       # after the actor's backward pass: its bootstraps read the target
            self._update_target()
        with phase("obs normaliser"):
            self.obs_normalizer.update(window.raw_obs, self.ranks)
        return self.context.iteration_metrics(metrics)

    def update_critic_and_discriminator(self, window: "Window") -> Dict[str, Tensor]:
        """The critic ensemble and the ADD discriminator learn from `window` (run in the update thread,
        beside `update_actor`: neither is read by the actor's loss, whose rewards read the
        discriminator's frozen copy and whose bootstraps read the target critic). Metrics as tensors."""
        metrics = self._train_critic(window)
        metrics.update(self.context.update_discriminator(window.deltas))
        return metrics

    def set_learning_rates(self, it: int) -> Dict[str, float]:
        cfg = self.cfg
        ramp = min(max((it - cfg.actor_warmup_iterations + 1) / (cfg.actor_ramp_iterations + 1), 0.0), 1.0)
        rates = {"lr/actor": ramp * linear_decay(cfg.actor_lr, cfg.final_lr, it, cfg.iterations),
                 "lr/critic": linear_decay(cfg.critic_lr, cfg.final_lr, it, cfg.iterations)}
        for optimizer, name in ((self.actor_optimizer, "lr/actor"), (self.critic_optimizer, "lr/critic")):
            for group in optimizer.param_groups:
                group["lr"] = rates[name]
        return rates

    def rollout(self):
        """Roll one window from the current state: (actor loss with its graph, detached `Window`). The
        rewards and the target critic's values are computed for all steps at once at the end."""
        obs = self.obs
        norm_obs_buf, raw_buf, steps = [], [], []
        for _ in range(self.cfg.horizon):
            norm_obs = self.obs_normalizer(obs)
            norm_obs_buf.append(norm_obs.detach())
            raw_buf.append(obs.detach())
            actions = self.actor.sample(norm_obs, self.context.generator)
            with phase("env step"):
                step = self.env.step(actions)
            steps.append(step)
            obs = step.obs
        self.obs = obs.detach()
        window = stack_steps(steps)
        with phase("ADD reward"):
            rewards = total_reward(self.context.rewards(window))
        with phase("target values"):
            values = self.target_critic.value(self.obs_normalizer(bootstrap_obs(window)))
        returns = window_returns(rewards, values, window.terminated, window.truncated, self.cfg.gamma)
        loss = -returns.sum() / rewards.numel()
        deltas = (window.add_ref - window.add_sim).detach().reshape(-1, window.add_sim.shape[-1])
        return loss, Window(torch.stack(norm_obs_buf), torch.stack(raw_buf), rewards.detach(), values.detach(),
                            window.terminated, window.truncated, deltas)

    def update_actor(self, loss: Tensor) -> Dict[str, Tensor]:
        """Backpropagate the window's loss through the env into the actor, average the gradient over
        ranks and step (unless non-finite); then cut the env's graph. Metrics as tensors."""
        self.actor_optimizer.zero_grad()
        with phase("actor backward"):
            loss.backward()
        params = list(self.actor.parameters())
        with phase("actor step"):
            loss = self.ranks.average_gradients(params, loss)
            norm = gradient_norm(params)
            stats = self.grad_stats.update([p.grad for p in params], norm, torch.isfinite(loss) & torch.isfinite(norm))
            finite = step_if_finite(loss, params, norm, self.cfg.actor_grad_clip, self.actor_optimizer)
            self.env.cut_graph()
        return {"loss/actor": loss.detach(), "grad_norm/actor": norm, "skipped/actor": (~finite).float(),
                "policy/std": self.actor.log_std.detach().exp().mean(), **stats}

    def _train_critic(self, window: Window) -> Dict[str, Tensor]:
        with phase("critic update"):
            cfg = self.cfg
            targets = td_lambda_targets(window.rewards, window.next_values, window.terminated, window.truncated,
                                        cfg.gamma, cfg.lam).reshape(-1)
            obs = window.obs.reshape(targets.shape[0], -1)
            n = targets.shape[0]
            batch = math.ceil(n / cfg.critic_minibatches)
            params = list(self.critic.parameters())
            steps, last_pass, norm_sum = 0, [], torch.zeros((), device=targets.device)
            taken = torch.zeros((), device=targets.device)
            for _ in range(cfg.critic_iterations):
                order = torch.randperm(n, generator=self.context.generator, device=targets.device)
                last_pass = []
                for start in range(0, n, batch):
                    idx = order[start:start + batch]
                    loss = (self.critic(obs[idx]) - targets[idx]).square().mean()
                    self.critic_optimizer.zero_grad()
                    loss.backward()
                    loss = self.update_ranks.average_gradients(params, loss)
                    norm = gradient_norm(params)
                    finite = step_if_finite(loss, params, norm, cfg.critic_grad_clip, self.critic_optimizer)
                    taken += finite.float()
                    norm_sum += torch.where(finite, norm, 0.0)
                    last_pass.append(loss.detach())
                    steps += 1
            return {"loss/critic": torch.stack(last_pass).mean(), "grad_norm/critic": norm_sum / taken,
                    "skipped/critic": steps - taken, "value/target_mean": targets.mean()}

    @torch.no_grad()
    def _update_target(self) -> None:
        for target, source in zip(self.target_critic.parameters(), self.critic.parameters()):
            target.lerp_(source, 1.0 - self.cfg.target_polyak)

    def policy(self) -> nn.Module:
        """The deterministic policy (shares the live networks)."""
        return DeterministicPolicy(self.obs_normalizer, self.actor)

    def state_dict(self) -> dict:
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "target_critic": self.target_critic.state_dict(), "obs_normalizer": self.obs_normalizer.state_dict(),
                "actor_optimizer": self.actor_optimizer.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict(), "grad_stats": self.grad_stats.state_dict(),
                "context": self.context.state_dict(), "obs": self.obs}

    def load_networks(self, state: dict) -> None:
        """The trained functions of a `state_dict` (actor, critics, observation normaliser, ADD
        discriminator), not the optimisers or the env: to study a checkpoint's policy on another env,
        or to start a run from it. A state trained on fewer observation entries, the first of ours
        (terms appended since), gets zero weights and unit statistics for the others, so it acts
        as it did."""
        self._load_own_networks(state)
        self.context.add.load_train_state(state["context"]["add"])

    def load_policy(self, weights) -> None:
        """The actor's mean network and the observation normaliser of an exported policy
        (`policy_weights.PolicyWeights`, its observation this run's or its first entries); the
        critics, the discriminator and the actor's log_std stay as initialised. The normaliser's
        count is set to `POLICY_NORMALIZER_COUNT` (the file does not keep it)."""
        obs_dim = self.obs_normalizer.mean.shape[0]
        own = self.actor.state_dict()
        dtype = own["log_std"].dtype                      # every parameter of the actor's
        actor = {**own, **{k: v.to(dtype) for k, v in weights.actor.items()}}
        self.actor.load_state_dict(with_inputs_appended(actor, obs_dim))
        eps = self.obs_normalizer.eps
        self.obs_normalizer.load_with_entries_appended(
            {"mean": weights.obs_mean, "var": weights.obs_var(eps),
             "count": torch.tensor(POLICY_NORMALIZER_COUNT, dtype=torch.float64)})

    def _load_own_networks(self, state: dict) -> None:
        obs_dim = self.obs_normalizer.mean.shape[0]
        self.actor.load_state_dict(with_inputs_appended(state["actor"], obs_dim))
        self.critic.load_state_dict(with_inputs_appended(state["critic"], obs_dim))
        self.target_critic.load_state_dict(with_inputs_appended(state["target_critic"], obs_dim))
        self.obs_normalizer.load_with_entries_appended(state["obs_normalizer"])

    def load_state_dict(self, state: dict) -> None:
        self._load_own_networks(state)                  # the ADD discriminator comes with the context
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.grad_stats.load_state_dict(state["grad_stats"])
        self.context.load_state_dict(state["context"])
        self.obs = state["obs"].to(self.env.device)
