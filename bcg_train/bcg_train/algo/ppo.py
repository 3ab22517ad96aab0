"""The PPO baseline: rsl-rl-lib's PPO on the same `DiffEnv` and reward, no gradients through the simulator.

`RslRlVecEnv` presents the env as an rsl_rl `VecEnv` (steps under `torch.no_grad`, reward = the ADD
term + the env's terms, computed with this run's discriminator). `Ppo` drives rsl_rl's `PPO`
(act / process_env_step / compute_returns / update) in the same runner as SHAC, so both write the
same logs and checkpoints. Time-outs bootstrap with the critic's value of the pre-reset state
(added to the reward, the episode then ends), which is exact where rsl_rl's own `time_outs`
handling approximates it with the value of the state before the step.
"""
from dataclasses import dataclass
from typing import Dict, Tuple

import torch
from rsl_rl.algorithms import PPO
from rsl_rl.env import VecEnv
from rsl_rl.models import MLPModel
from tensordict import TensorDict
from torch import Tensor, nn

from bcg.config_check import FRACTION, LAYERS, NON_NEGATIVE, POSITIVE, Settings, one_of, setting

from ..env_api import DiffEnv
from .add import AddConfig
from .concurrent_updates import UpdateThread
from .data_parallel import Ranks
from .imitation_context import ImitationContext
from .phases import phase
from .reward import total_reward

ACTIVATIONS = ("elu", "relu", "selu", "tanh")
"""Activations PpoConfig accepts (names rsl_rl resolves)."""


@dataclass
class PpoConfig(Settings):
    """The PPO baseline (rsl-rl-lib), no gradients through the simulator."""

    num_envs: int = setting(4096, POSITIVE)
    """Parallel environments (the paper's PPO baseline)."""
    steps_per_env: int = setting(24, POSITIVE)
    """Control steps per environment per iteration."""
    iterations: int = setting(3000, POSITIVE)
    """PPO iterations in a run."""
    learning_rate: float = setting(1e-3, POSITIVE)
    """Initial Adam learning rate (adapted to `desired_kl`)."""
    desired_kl: float = setting(0.01, POSITIVE)
    """KL target of rsl_rl's adaptive learning-rate schedule."""
    gamma: float = setting(0.99, FRACTION)
    """Discount per control step."""
    lam: float = setting(0.95, FRACTION)
    """GAE lambda."""
    learning_epochs: int = setting(5, POSITIVE)
    """Passes over a rollout per update."""
    mini_batches: int = setting(4, POSITIVE)
    """Minibatches per pass."""
    clip_param: float = setting(0.2, POSITIVE)
    """PPO ratio clip."""
    entropy_coef: float = setting(0.01, NON_NEGATIVE)
    """Entropy bonus weight (rsl_rl's default)."""
    max_grad_norm: float = setting(1.0, POSITIVE)
    """Gradient-norm clip."""
    actor_hidden: Tuple[int, ...] = setting((512, 256, 128), LAYERS)
    """Actor MLP hidden widths (ELU; rsl_rl's MLP has no LayerNorm)."""
    critic_hidden: Tuple[int, ...] = setting((512, 256, 128), LAYERS)
    """Critic MLP hidden widths."""
    init_action_std: float = setting(1.0, POSITIVE)
    """Initial standard deviation of the Gaussian policy."""
    activation: str = setting("elu", one_of(*ACTIVATIONS))
    """Hidden-layer activation of actor and critic (rsl_rl's names)."""
    value_loss_coef: float = setting(1.0, POSITIVE)
    """Weight of the value loss in PPO's total loss (rsl_rl's default)."""
    use_clipped_value_loss: bool = True
    """Clip the value update to clip_param around the old values (rsl_rl's default)."""
    schedule: str = setting("adaptive", one_of("adaptive", "fixed"))
    """'adaptive': the learning rate follows `desired_kl`; 'fixed': it stays at `learning_rate`."""


OBS_GROUP = "policy"
"""The single observation group the wrapper exposes (actor and critic both read it)."""


def as_tensordict(obs: Tensor) -> TensorDict:
    return TensorDict({OBS_GROUP: obs}, batch_size=[obs.shape[0]])


class RslRlVecEnv(VecEnv):
    """A `DiffEnv` as an rsl_rl `VecEnv`, its reward from `context` (which records it). `extras`
    carries the step's `EnvStep` and `time_outs` (the `truncated` flags)."""

    def __init__(self, env: DiffEnv, context: ImitationContext):
        self.env, self.context = env, context
        self.num_envs, self.num_actions, self.device = env.num_envs, env.act_dim, env.device
        self.cfg = {}
        with torch.no_grad():
            self.obs = env.reset()

    def get_observations(self) -> TensorDict:
        return as_tensordict(self.obs)

    def step(self, actions: Tensor):
        with torch.no_grad():
            with phase("env step"):
                step = self.env.step(actions)
            with phase("ADD reward"):
                reward = total_reward(self.context.rewards(step))
        self.obs = step.obs
        extras = {"time_outs": step.truncated, "step": step}
        return as_tensordict(step.obs), reward, step.terminated | step.truncated, extras


def rsl_rl_config(cfg: PpoConfig, ranks: Ranks) -> dict:
    """rsl_rl's runner-style configuration for `PPO.construct_algorithm` (with several ranks, rsl_rl's
    own multi-process mode: gradients, KL and normaliser statistics averaged over ranks)."""
    multi_gpu = None
    if ranks.world_size > 1:
        multi_gpu = {"global_rank": ranks.rank, "local_rank": ranks.rank, "world_size": ranks.world_size}
    return {
        "num_steps_per_env": cfg.steps_per_env,
        "obs_groups": {"actor": [OBS_GROUP], "critic": [OBS_GROUP]},
        "multi_gpu": multi_gpu,
        "algorithm": {"class_name": "PPO", "num_learning_epochs": cfg.learning_epochs,
                      "num_mini_batches": cfg.mini_batches, "clip_param": cfg.clip_param, "gamma": cfg.gamma,
                      "lam": cfg.lam, "value_loss_coef": cfg.value_loss_coef, "entropy_coef": cfg.entropy_coef,
                      "learning_rate": cfg.learning_rate, "max_grad_norm": cfg.max_grad_norm,
                      "use_clipped_value_loss": cfg.use_clipped_value_loss, "schedule": cfg.schedule,
                      "desired_kl": cfg.desired_kl},
        "actor": {"class_name": "MLPModel", "hidden_dims": list(cfg.actor_hidden), "activation": cfg.activation,
                  "obs_normalization": True,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": cfg.init_action_std,
                                       "std_type": "scalar"}},
        "critic": {"class_name": "MLPModel", "hidden_dims": list(cfg.critic_hidden), "activation": cfg.activation,
                   "obs_normalization": True},
    }


def deployable_policy(state: dict, cfg: PpoConfig, obs_dim: int, act_dim: int) -> nn.Module:
    """The deterministic policy (normaliser + MLP mean) of a PPO checkpoint's `algorithm` state, on the CPU."""
    actor_cfg = dict(rsl_rl_config(cfg, Ranks())["actor"])
    actor_cfg.pop("class_name")
    actor = MLPModel(as_tensordict(torch.zeros(1, obs_dim)), {"actor": [OBS_GROUP]}, "actor", act_dim, **actor_cfg)
    actor.load_state_dict(state["rsl_rl"]["actor_state_dict"])
    return actor.as_onnx(verbose=False).eval()


class Ppo:
    """rsl_rl PPO with the ADD reward on a `DiffEnv`; `iteration` runs one rollout and all updates."""

    name = "ppo"

    def __init__(self, env: DiffEnv, cfg: PpoConfig, add: AddConfig, seed: int):
        self.env, self.cfg = env, cfg
        self.ranks = Ranks()
        self.update_thread = UpdateThread()
        self.context = ImitationContext(env, add, seed, self.ranks.for_another_thread())   # its update: a thread
        self.vec_env = RslRlVecEnv(env, self.context)
        self.alg = PPO.construct_algorithm(self.vec_env.get_observations(), self.vec_env,
                                           rsl_rl_config(self.cfg, self.ranks), str(env.device))
        if self.ranks.world_size > 1:
            self.alg.broadcast_parameters()
        if self.ranks.rank:   # rsl_rl samples actions from torch's global generator: each rank its own noise
            torch.manual_seed(seed + self.ranks.rank)
        self.alg.train_mode()

    @property
    def iterations(self) -> int:
        return self.cfg.iterations

    @property
    def env_steps_per_iteration(self) -> int:
        """Environment steps of all ranks together."""
        return self.cfg.steps_per_env * self.env.num_envs * self.ranks.world_size

    def iteration(self, it: int) -> Dict[str, float]:
        """Run iteration `it`; returns its metrics by name (rsl_rl's learning rate adapts to the KL)."""
        deltas = []
        obs = self.vec_env.get_observations()
        with torch.no_grad():
            for _ in range(self.cfg.steps_per_env):
                with phase("rollout"):
                    actions = self.alg.act(obs)
                    obs, rewards, dones, extras = self.vec_env.step(actions)
                    step = extras["step"]
                    final_value = self.alg.critic(as_tensordict(step.obs_before_reset)).squeeze(-1)
                    rewards = rewards + torch.where(step.truncated, self.cfg.gamma * final_value, 0.0)
                    self.alg.process_env_step(obs, rewards, dones, {})
                    deltas.append(step.add_ref - step.add_sim)
            with phase("returns"):
                self.alg.compute_returns(obs)
                self._normalize_advantages_over_ranks()
        deltas = torch.cat(deltas)
        metrics, losses = self.update_thread.run_beside(lambda: self.context.update_discriminator(deltas),
                                                        self._update_policy)
        metrics.update({f"loss/{k}": float(v) for k, v in losses.items()})
        metrics.update({"lr/actor": float(self.alg.learning_rate),
                        "policy/std": self.alg.get_policy().output_std.detach().mean()})
        return self.context.iteration_metrics(metrics)

    def _update_policy(self) -> Dict[str, float]:
        """rsl_rl's PPO update on the rollout (beside the discriminator's, `concurrent_updates`)."""
        with phase("PPO update"):
            return self.alg.update()

    def _normalize_advantages_over_ranks(self) -> None:
        """rsl_rl normalises the rollout's advantages to zero mean and unit std within each process;
        normalise them over the samples of all ranks instead, as one process with every rank's
        environments would (with one process: the same numbers)."""
        st = self.alg.storage
        raw = st.returns - st.values
        sums = torch.stack([raw.sum(), raw.square().sum(), raw.new_tensor(float(raw.numel()))]).to(torch.float64)
        self.ranks.sum_([sums])
        total, total_sq, n = sums
        mean = total / n
        std = ((total_sq - n * mean.square()) / (n - 1)).clamp_min(0.0).sqrt()
        st.advantages = ((raw - mean) / (std + 1e-8)).to(raw.dtype)

    def policy(self) -> nn.Module:
        """The deterministic policy (a copy of the live actor)."""
        return self.alg.get_policy().as_onnx(verbose=False).eval()

    def state_dict(self) -> dict:
        return {"rsl_rl": self.alg.save(), "context": self.context.state_dict(), "obs": self.vec_env.obs}

    def load_state_dict(self, state: dict) -> None:
        self.alg.load(state["rsl_rl"], None, strict=True)
        self.context.load_state_dict(state["context"])
        self.vec_env.obs = state["obs"].to(self.env.device)
