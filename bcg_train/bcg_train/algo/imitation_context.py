"""What SHAC and PPO share around their own networks: the env, the ADD reward and its training, the
trainer's random generator, the rollout statistics and the env's latest counters."""
from typing import Dict

import torch
from torch import Tensor

from ..env_api import DiffEnv, EnvStep
from .add import AddConfig, AdversarialDifferentialReward
from .episodes import RolloutStats
from .phases import phase
from .reward import reward_terms


class ImitationContext:
    """One per algorithm instance; `state_dict` covers everything here, the env's state included."""

    def __init__(self, env: DiffEnv, add_cfg: AddConfig, seed: int):
        self.env = env
        self.add = AdversarialDifferentialReward(env.add_dim, add_cfg, env.device)
        self.generator = torch.Generator(device=env.device).manual_seed(seed)
        """Every random number the trainer itself draws (action noise, minibatches, replay samples)."""
        self.stats = RolloutStats(env.num_envs, env.device)
        self.counters: Dict[str, float] = {}

    def rewards(self, step: EnvStep) -> Dict[str, Tensor]:
        """The step's named reward terms (ADD + env), recorded for the iteration's statistics."""
        terms = reward_terms(step, self.add)
        self.stats.record(terms, step.terminated, step.truncated)
        self.counters = step.counters
        return terms

    def finish_iteration(self, deltas: Tensor) -> Dict[str, float]:
        """Train the discriminator on the iteration's ADD deltas (B, F); metrics of the iteration."""
        with phase("discriminator update"):
            metrics = self.add.update(deltas, self.generator)
        with phase("metrics"):
            metrics.update(self.stats.pop())
            metrics.update({f"env/{k}": float(v) for k, v in self.counters.items()})
        return metrics

    def state_dict(self) -> dict:
        return {"add": self.add.train_state(), "generator": self.generator.get_state(), "env": self.env.state_dict(),
                "stats": self.stats.state_dict(), "counters": dict(self.counters)}

    def load_state_dict(self, state: dict) -> None:
        self.add.load_train_state(state["add"])
        self.generator.set_state(state["generator"].cpu())
        self.env.load_state_dict(state["env"])
        self.stats.load_state_dict(state["stats"])
        self.counters = dict(state["counters"])
