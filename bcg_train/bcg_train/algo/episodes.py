"""Per-iteration statistics of a rollout: finished episodes and mean reward terms."""
import math
from typing import Dict

import torch
from torch import Tensor

from .reward import total_reward


class RolloutStats:
    """Running episode returns/lengths per env, and this iteration's sums of reward terms.

    Tensors stay on the device until `pop`, so logging costs one synchronisation per iteration.
    """

    def __init__(self, num_envs: int, device: torch.device):
        self.episode_return = torch.zeros(num_envs, device=device)
        self.episode_length = torch.zeros(num_envs, device=device)
        self._clear()

    def _clear(self) -> None:
        self.finished_returns, self.finished_lengths, self.finished_failed = [], [], []
        self.term_sums: Dict[str, Tensor] = {}
        self.steps = 0

    def record(self, terms: Dict[str, Tensor], terminated: Tensor, truncated: Tensor) -> None:
        """One step: `terms` name -> (N,) rewards, end flags (N,) bool."""
        total = total_reward(terms).detach()
        for k, v in terms.items():
            self.term_sums[k] = self.term_sums.get(k, 0.0) + v.detach().mean()
        self.term_sums["total"] = self.term_sums.get("total", 0.0) + total.mean()
        self.steps += 1
        self.episode_return += total
        self.episode_length += 1
        done = terminated | truncated
        self.finished_returns.append(self.episode_return[done])
        self.finished_lengths.append(self.episode_length[done])
        self.finished_failed.append(terminated[done])
        self.episode_return = torch.where(done, torch.zeros_like(total), self.episode_return)
        self.episode_length = torch.where(done, torch.zeros_like(total), self.episode_length)

    def pop(self) -> Dict[str, float]:
        """Mean reward per env-step of each term ('reward/<name>'), and the episodes that ended since
        the last pop ('episode/return', 'episode/length' undiscounted; NaN when none ended)."""
        out = {f"reward/{k}": (v / self.steps).item() for k, v in self.term_sums.items()}
        returns = torch.cat(self.finished_returns) if self.finished_returns else torch.zeros(0)
        n = returns.numel()
        out["episode/count"] = float(n)
        out["episode/return"] = returns.mean().item() if n else math.nan
        out["episode/length"] = torch.cat(self.finished_lengths).mean().item() if n else math.nan
        out["episode/failed_fraction"] = torch.cat(self.finished_failed).float().mean().item() if n else math.nan
        self._clear()
        return out

    def state_dict(self) -> dict:
        return {"episode_return": self.episode_return, "episode_length": self.episode_length}

    def load_state_dict(self, state: dict) -> None:
        self.episode_return = state["episode_return"].to(self.episode_return.device, copy=True)
        self.episode_length = state["episode_length"].to(self.episode_length.device, copy=True)
