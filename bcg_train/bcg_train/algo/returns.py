"""Window returns and TD(lambda) targets: pure functions of stacked per-step tensors.

Shapes: T control steps of N environments, step t going from state s_t to s_{t+1}.
- `rewards` (T, N): r_t.
- `next_values` (T, N): V(s_{t+1}) of the state step t reached *before any reset* (the critic on
  `EnvStep.obs_before_reset`); where step t terminated it is ignored (V = 0 beyond a failure),
  where it was truncated (time-out) it is the bootstrap.
- `terminated`, `truncated` (T, N) bool: how the episode ended at step t, if it did.
The window's last step always ends a segment (bootstrap with V(s_T)): gradients and targets are cut
there. One (T, N) `next_values` suffices because an env that did not end continues from s_{t+1}.
"""
import torch
from torch import Tensor


def segment_ends(terminated: Tensor, truncated: Tensor) -> Tensor:
    """(T, N) bool: step t closes a segment (the episode ended, or t is the window's last step)."""
    ends = terminated | truncated
    ends[-1] = True
    return ends


def bootstrap_values(next_values: Tensor, terminated: Tensor) -> Tensor:
    """(T, N) values to bootstrap with after each step: 0 where the episode failed."""
    return torch.where(terminated, torch.zeros_like(next_values), next_values)


def td_lambda_targets(rewards: Tensor, next_values: Tensor, terminated: Tensor, truncated: Tensor,
                      gamma: float, lam: float) -> Tensor:
    """(T, N) truncated TD(lambda) returns, the critic's regression targets.

    G_t = r_t + gamma * V'_t                                    where step t ends a segment,
    G_t = r_t + gamma * ((1 - lam) * V'_t + lam * G_{t+1})      otherwise,
    with V'_t = `bootstrap_values` (0 after a termination). Equivalently, the lambda-weighted mean
    of the n-step returns inside the segment, the remaining weight on the longest one.
    """
    ends = segment_ends(terminated, truncated)
    values = bootstrap_values(next_values, terminated)
    targets = torch.empty_like(rewards)
    g = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        g = rewards[t] + gamma * torch.where(ends[t], values[t], (1.0 - lam) * values[t] + lam * g)
        targets[t] = g
    return targets


def window_returns(rewards: Tensor, next_values: Tensor, terminated: Tensor, truncated: Tensor,
                   gamma: float) -> Tensor:
    """(N,) SHAC's objective per env: the sum over the window's segments of
    sum_{k=s}^{e} gamma^(k-s) r_k + gamma^(e-s+1) V'_e (segment from step s to its end e).

    Differentiable w.r.t. `rewards` and `next_values`: SHAC backpropagates it through the simulator.
    """
    ends = segment_ends(terminated, truncated)
    values = bootstrap_values(next_values, terminated)
    discount = torch.ones_like(rewards[0])
    total = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0]):
        total = total + discount * rewards[t]
        total = total + torch.where(ends[t], discount * gamma * values[t], torch.zeros_like(total))
        discount = torch.where(ends[t], torch.ones_like(discount), discount * gamma)
    return total
