"""SHAC's networks: a Gaussian actor with a state-independent std and an ensemble of critics.

Both take *normalised* observations (B, obs_dim) float32 (see `obs_normalizer`). Hidden layers are
Linear -> ELU -> LayerNorm, as in DiffRL's SHAC models.
"""
import math
import re
from typing import Dict, Optional, Sequence

import torch
from torch import Tensor, nn


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int) -> nn.Sequential:
    """Linear -> ELU -> LayerNorm for each hidden width, then a Linear to `out_dim`."""
    layers, width = [], in_dim
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ELU(), nn.LayerNorm(h)]
        width = h
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


class GaussianActor(nn.Module):
    """pi(a | o) = N(mean(o), diag(exp(log_std))^2); actions are the env's raw actions."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int], init_std: float):
        super().__init__()
        self.net = mlp(obs_dim, hidden, act_dim)
        self.log_std = nn.Parameter(torch.full((act_dim,), math.log(init_std)))

    def forward(self, obs: Tensor) -> Tensor:
        """(B, act_dim) mean action: the deterministic policy."""
        return self.net(obs)

    def sample(self, obs: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        """(B, act_dim) reparameterised sample mean + std * eps: differentiable w.r.t. both."""
        mean = self.net(obs)
        eps = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        return mean + self.log_std.exp() * eps


class CriticEnsemble(nn.Module):
    """`members` independent value MLPs trained on the same targets."""

    def __init__(self, obs_dim: int, hidden: Sequence[int], members: int):
        super().__init__()
        self.members = nn.ModuleList(mlp(obs_dim, hidden, 1) for _ in range(members))

    def forward(self, obs: Tensor) -> Tensor:
        """(members, B) every member's value."""
        return torch.stack([m(obs).squeeze(-1) for m in self.members])

    def value(self, obs: Tensor) -> Tensor:
        """(B,) the ensemble's value: the minimum over members (AHAC's choice, a pessimistic estimate
        that counters the actor exploiting one critic's overestimates)."""
        return self.forward(obs).min(dim=0).values


_INPUT_LAYER = re.compile(r"(^|\.)(net|members\.\d+)\.0\.weight$")
"""Keys of the first Linear's weight (out, in) of `mlp` in a GaussianActor's or CriticEnsemble's state_dict."""


def with_inputs_appended(state: Dict[str, Tensor], obs_dim: int) -> Dict[str, Tensor]:
    """The `state_dict` of a GaussianActor or CriticEnsemble trained on fewer observation entries,
    its input layers given zero weights for the entries appended up to `obs_dim`: the networks
    compute what they computed before until training gives the new entries weight."""
    def widened(key: str, value: Tensor) -> Tensor:
        if not _INPUT_LAYER.search(key) or value.shape[1] == obs_dim:
            return value
        return torch.cat([value, value.new_zeros(value.shape[0], obs_dim - value.shape[1])], dim=1)
    return {k: widened(k, v) for k, v in state.items()}
