"""What SHAC and PPO share around their own networks: the env, the ADD reward and its training, the
trainer's random generator, the rollout statistics, the env's latest counters and the ranks of a
data-parallel run."""
from typing import Dict

import torch
from torch import Tensor

from ..env_api import DiffEnv, EnvStep
from .add import AddConfig, AdversarialDifferentialReward
from .data_parallel import Metric, Ranks
from .episodes import RolloutStats
from .phases import phase
from .reward import reward_terms


class ImitationContext:
    """One per algorithm instance; `state_dict` covers everything here, the env's state included."""

    def __init__(self, env: DiffEnv, add_cfg: AddConfig, seed: int, ranks: Ranks):
        self.env, self.ranks = env, ranks
        self.add = AdversarialDifferentialReward(env.add_dim, add_cfg, env.device, ranks)
        self.generator = torch.Generator(device=env.device).manual_seed(seed + ranks.rank)
        """Every random number the trainer itself draws (action noise, minibatches, replay samples);
        each rank its own stream."""
        self.stats = RolloutStats(env.num_envs, env.device)
        self.counters: Dict[str, float] = {}

    def rewards(self, step: EnvStep) -> Dict[str, Tensor]:
        """The named reward terms (ADD + env) of one step, or of a window of steps stacked along a leading
        time axis (see `shac.stack_steps`), recorded for the iteration's statistics."""
        terms = reward_terms(step, self.add)
        self.stats.record(terms, step.terminated, step.truncated, step.fell)
        self.counters = step.counters
        return terms

    def update_discriminator(self, deltas: Tensor) -> Dict[str, Tensor]:
        """Train the discriminator on the iteration's ADD deltas (B, F); its metrics as tensors."""
        with phase("discriminator update"):
            return self.add.update(deltas, self.generator)

    def iteration_metrics(self, metrics: Dict[str, Metric]) -> Dict[str, float]:
        """`metrics` with the rollout statistics and the env's counters, combined over ranks, as floats
        (one transfer from the device)."""
        with phase("metrics"):
            metrics = {**metrics, **self.stats.pop(), **{f"env/{k}": v for k, v in self.counters.items()}}
            return self.ranks.metrics_to_host(metrics, self.env.device)

    def state_dict(self) -> dict:
        return {"add": self.add.train_state(), "generator": self.generator.get_state(), "env": self.env.state_dict(),
                "stats": self.stats.state_dict(), "counters": dict(self.counters)}

    def load_state_dict(self, state: dict) -> None:
        self.add.load_train_state(state["add"])
        self.generator.set_state(state["generator"].cpu())
        self.env.load_state_dict(state["env"])
        self.stats.load_state_dict(state["stats"])
        self.counters = dict(state["counters"])
