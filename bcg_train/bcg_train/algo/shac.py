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
Learning rates decay linearly from their initial values to `final_lr` over the run.
"""
import copy
import math
from dataclasses import dataclass
from typing import Dict, List, Tuple

import torch
from torch import Tensor, nn

from bcg.config_check import check, require_fraction, require_layers, require_positive

from ..env_api import DiffEnv, EnvStep
from .add import AddConfig
from .imitation_context import ImitationContext
from .networks import CriticEnsemble, GaussianActor
from .obs_normalizer import RunningObsNormalizer
from .phases import phase
from .returns import td_lambda_targets, window_returns
from .reward import total_reward


@dataclass
class ShacConfig:
    """SHAC (Xu et al. 2022) with the BCG paper's settings."""

    num_envs: int = 64
    """Parallel environments when bundling is on."""
    num_envs_without_bundle: int = 128
    """Parallel environments with `--no-bundle` (the paper doubles them)."""
    horizon: int = 32
    """Control steps per window (gradients are cut between windows)."""
    iterations: int = 3000
    """Windows (= actor updates) in a run."""
    gamma: float = 0.99
    """Discount per control step."""
    lam: float = 0.95
    """TD(lambda) mixing of the critic targets."""
    actor_lr: float = 5e-3
    """Actor Adam learning rate at iteration 0, decaying linearly to `final_lr`."""
    critic_lr: float = 2e-3
    """Critic Adam learning rate at iteration 0, decaying linearly to `final_lr`."""
    final_lr: float = 1e-5
    """Learning rate both reach at the last iteration."""
    betas: Tuple[float, float] = (0.7, 0.95)
    """Adam betas of actor and critic."""
    actor_grad_clip: float = 1.0
    """Global gradient-norm clip of the actor."""
    critic_grad_clip: float = 10.0
    """Global gradient-norm clip of the critic ensemble."""
    critic_iterations: int = 16
    """Passes over a window's samples per critic update."""
    critic_minibatches: int = 4
    """Minibatches per pass."""
    target_polyak: float = 0.995
    """Target critic <- polyak * target + (1 - polyak) * critic, once per iteration."""
    actor_hidden: Tuple[int, ...] = (512, 256, 128)
    """Actor MLP hidden widths (Linear, ELU, LayerNorm each)."""
    critic_hidden: Tuple[int, ...] = (256, 256)
    """Critic MLP hidden widths, per ensemble member."""
    critic_ensemble: int = 3
    """Critics in the ensemble; bootstraps take their minimum."""
    init_action_std: float = 1.0
    """Initial standard deviation of the Gaussian policy (raw action units)."""

    def validate(self) -> None:
        require_positive(self, "num_envs", "num_envs_without_bundle", "horizon", "iterations", "actor_lr",
                         "critic_lr", "final_lr", "actor_grad_clip", "critic_grad_clip", "critic_iterations",
                         "critic_minibatches", "critic_ensemble", "init_action_std")
        require_fraction(self, "gamma", "lam", "target_polyak")
        require_layers(self, "actor_hidden", "critic_hidden")
        check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "betas",
              f"must be two numbers in [0, 1), got {list(self.betas)!r}")
        check(self.num_envs * self.horizon >= self.critic_minibatches, "critic_minibatches",
              f"{self.critic_minibatches} minibatches exceed num_envs * horizon = {self.num_envs * self.horizon}")


def linear_decay(start: float, end: float, iteration: int, iterations: int) -> float:
    """start at iteration 0, moving linearly towards end at `iterations` (DiffRL's schedule)."""
    return start + (end - start) * iteration / iterations


def step_if_finite(loss: Tensor, params: List[nn.Parameter], clip: float, optimizer: torch.optim.Optimizer) -> Tensor:
    """Clip the gradient norm of `params` and step, unless the loss or the gradient norm is not
    finite (then the gradients are dropped). Returns the norm before clipping (inf when skipped)."""
    norm = nn.utils.clip_grad_norm_(params, clip)
    if torch.isfinite(loss) and torch.isfinite(norm):
        optimizer.step()
        return norm
    optimizer.zero_grad()
    return torch.full_like(norm, math.inf)


def bootstrap_obs(step: EnvStep) -> Tensor:
    """The observations to value after `step`: the pre-reset ones, zeros where the episode failed
    (their value is not used, and a diverged failed state must not put NaN into the gradient)."""
    failed = step.terminated[:, None]
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
        actor, critic, normalizer = build_networks(cfg, env.obs_dim, env.act_dim)
        self.actor, self.critic, self.obs_normalizer = actor.to(device), critic.to(device), normalizer.to(device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.context = ImitationContext(env, add, seed)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=self.cfg.actor_lr, betas=self.cfg.betas)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=self.cfg.critic_lr, betas=self.cfg.betas)
        self.obs = env.reset()

    @property
    def iterations(self) -> int:
        return self.cfg.iterations

    @property
    def env_steps_per_iteration(self) -> int:
        return self.cfg.horizon * self.env.num_envs

    def iteration(self, it: int) -> Dict[str, float]:
        """Run iteration `it` (0-based): window, actor, critic, target, discriminator, normaliser."""
        metrics = self.set_learning_rates(it)
        with phase("rollout"):
            loss, window = self.rollout()
        metrics.update(self.update_actor(loss))
        with phase("critic update"):
            metrics.update(self._train_critic(window))
        with phase("target update"):
            self._update_target()
        with phase("obs normaliser"):
            self.obs_normalizer.update(window.raw_obs)
        metrics.update(self.context.finish_iteration(window.deltas))
        return metrics

    def set_learning_rates(self, it: int) -> Dict[str, float]:
        cfg = self.cfg
        rates = {"lr/actor": linear_decay(cfg.actor_lr, cfg.final_lr, it, cfg.iterations),
                 "lr/critic": linear_decay(cfg.critic_lr, cfg.final_lr, it, cfg.iterations)}
        for optimizer, name in ((self.actor_optimizer, "lr/actor"), (self.critic_optimizer, "lr/critic")):
            for group in optimizer.param_groups:
                group["lr"] = rates[name]
        return rates

    def rollout(self):
        """Roll one window from the current state: (actor loss with its graph, detached `Window`)."""
        obs = self.obs
        obs_buf, raw_buf, rewards, values, terminated, truncated, deltas = [], [], [], [], [], [], []
        for _ in range(self.cfg.horizon):
            norm_obs = self.obs_normalizer(obs)
            obs_buf.append(norm_obs.detach())
            raw_buf.append(obs.detach())
            actions = self.actor.sample(norm_obs, self.context.generator)
            with phase("env step"):
                step = self.env.step(actions)
            with phase("ADD reward"):
                rewards.append(total_reward(self.context.rewards(step)))
            with phase("target values"):
                values.append(self.target_critic.value(self.obs_normalizer(bootstrap_obs(step))))
            terminated.append(step.terminated)
            truncated.append(step.truncated)
            deltas.append((step.add_ref - step.add_sim).detach())
            obs = step.obs
        self.obs = obs.detach()
        rewards, values = torch.stack(rewards), torch.stack(values)
        terminated, truncated = torch.stack(terminated), torch.stack(truncated)
        returns = window_returns(rewards, values, terminated, truncated, self.cfg.gamma)
        loss = -returns.sum() / rewards.numel()
        window = Window(torch.stack(obs_buf), torch.stack(raw_buf), rewards.detach(), values.detach(),
                        terminated, truncated, torch.cat(deltas))
        return loss, window

    def update_actor(self, loss: Tensor) -> Dict[str, float]:
        """Backpropagate the window's loss through the env into the actor and step (unless non-finite);
        then cut the env's graph."""
        self.actor_optimizer.zero_grad()
        with phase("actor backward"):
            if torch.isfinite(loss):
                loss.backward()
        with phase("actor step"):
            norm = step_if_finite(loss, list(self.actor.parameters()), self.cfg.actor_grad_clip, self.actor_optimizer)
            self.env.cut_graph()
        return {"loss/actor": loss.item(), "grad_norm/actor": norm.item(),
                "skipped/actor": float(not torch.isfinite(norm)), "policy/std": self.actor.log_std.exp().mean().item()}

    def _train_critic(self, window: Window) -> Dict[str, float]:
        cfg = self.cfg
        targets = td_lambda_targets(window.rewards, window.next_values, window.terminated, window.truncated,
                                    cfg.gamma, cfg.lam).reshape(-1)
        obs = window.obs.reshape(targets.shape[0], -1)
        n = targets.shape[0]
        batch = math.ceil(n / cfg.critic_minibatches)
        params = list(self.critic.parameters())
        skipped, last_pass, norms = 0, [], []
        for _ in range(cfg.critic_iterations):
            order = torch.randperm(n, generator=self.context.generator, device=targets.device)
            last_pass = []
            for start in range(0, n, batch):
                idx = order[start:start + batch]
                loss = (self.critic(obs[idx]) - targets[idx]).square().mean()
                self.critic_optimizer.zero_grad()
                loss.backward()
                norm = step_if_finite(loss, params, cfg.critic_grad_clip, self.critic_optimizer)
                skipped += int(not torch.isfinite(norm))
                last_pass.append(loss.detach())
                norms.append(norm)
        return {"loss/critic": torch.stack(last_pass).mean().item(), "grad_norm/critic": torch.stack(norms).mean().item(),
                "skipped/critic": float(skipped), "value/target_mean": targets.mean().item()}

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
                "critic_optimizer": self.critic_optimizer.state_dict(), "context": self.context.state_dict(),
                "obs": self.obs}

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.target_critic.load_state_dict(state["target_critic"])
        self.obs_normalizer.load_state_dict(state["obs_normalizer"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.context.load_state_dict(state["context"])
        self.obs = state["obs"].to(self.env.device)
