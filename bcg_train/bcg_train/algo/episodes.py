"""Per-iteration statistics of a rollout: finished episodes and mean reward terms."""
from typing import Dict, Optional

import torch
from torch import Tensor

from .data_parallel import Metric, Ratio, Total
from .reward import total_reward


class RolloutStats:
    """Running episode returns/lengths per env, and this iteration's sums of reward terms and of the
    episodes that ended. Everything stays on the device (no host synchronisation until the
    iteration's metrics are read)."""

    def __init__(self, num_envs: int, device: torch.device):
        self.episode_return = torch.zeros(num_envs, device=device)
        self.episode_length = torch.zeros(num_envs, device=device)
        self._clear()

    def _clear(self) -> None:
        zero = torch.zeros((), device=self.episode_return.device)
        self.term_sums: Dict[str, Tensor] = {}
        self.steps = 0
        self.ended, self.ended_return, self.ended_length, self.ended_failed = zero, zero, zero, zero
        self.ended_fell: Optional[Tensor] = None

    def record(self, terms: Dict[str, Tensor], terminated: Tensor, truncated: Tensor,
               fell: Optional[Tensor] = None) -> None:
        """Consecutive steps: `terms` name -> (T, N) or (N,) rewards, end flags of the same shape (bool);
        `fell`: of the terminated, those that fell (`EnvStep.fell`), or None."""
        n = self.episode_return.shape[0]
        terms = {k: v.detach().reshape(-1, n) for k, v in terms.items()}
        terminated, truncated = terminated.reshape(-1, n), truncated.reshape(-1, n)
        total = total_reward(terms)
        for k, v in {**terms, "total": total}.items():
            self.term_sums[k] = self.term_sums.get(k, 0.0) + v.mean(dim=1).sum()
        self.steps += total.shape[0]
        if fell is not None:
            fallen = (fell.reshape(-1, n) & terminated).sum()
            self.ended_fell = fallen if self.ended_fell is None else self.ended_fell + fallen
        for t in range(total.shape[0]):
            self.episode_return = self.episode_return + total[t]
            self.episode_length = self.episode_length + 1
            done = terminated[t] | truncated[t]
            self.ended = self.ended + done.sum()
            self.ended_return = self.ended_return + torch.where(done, self.episode_return, 0.0).sum()
            self.ended_length = self.ended_length + torch.where(done, self.episode_length, 0.0).sum()
            self.ended_failed = self.ended_failed + (terminated[t] & done).sum()
            self.episode_return = torch.where(done, 0.0, self.episode_return)
            self.episode_length = torch.where(done, 0.0, self.episode_length)

    def pop(self) -> Dict[str, Metric]:
        """Mean reward per env-step of each term ('reward/<name>'), and the episodes that ended since
        the last pop ('episode/return', 'episode/length' undiscounted, 'episode/failed_fraction' and,
        where the env tells falls apart, 'episode/fell_fraction': NaN when none ended; 'episode/count')."""
        out: Dict[str, Metric] = {f"reward/{k}": v / self.steps for k, v in self.term_sums.items()}
        out["episode/count"] = Total(self.ended)
        out["episode/return"] = Ratio(self.ended_return, self.ended)
        out["episode/length"] = Ratio(self.ended_length, self.ended)
        out["episode/failed_fraction"] = Ratio(self.ended_failed, self.ended)
        if self.ended_fell is not None:
            out["episode/fell_fraction"] = Ratio(self.ended_fell, self.ended)
        self._clear()
        return out

    def state_dict(self) -> dict:
        return {"episode_return": self.episode_return, "episode_length": self.episode_length}

    def load_state_dict(self, state: dict) -> None:
        self.episode_return = state["episode_return"].to(self.episode_return.device, copy=True)
        self.episode_length = state["episode_length"].to(self.episode_length.device, copy=True)
