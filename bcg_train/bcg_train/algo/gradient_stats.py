"""Statistics of the actor's gradient across updates, the quantities that plausibly decide whether a
first-order (SHAC) update helps: its size, how often clipping changes it, how consistent successive
windows' gradients are, and how much they vary from window to window.

Each SHAC iteration's gradient g_k is one window's estimate (all environments of all ranks together,
before clipping). Variance across *environments* would need one backward pass per environment, so
the spread is measured across recent *windows* instead, as exponential averages over about
`window` updates (weights (1 - 1/window)^age, normalised so that early iterations are not biased
towards zero). Windows differ both by noise and because the policy moves between them.
"""
from typing import Dict, Sequence

import torch
from torch import Tensor, nn


class GradientStats(nn.Module):
    """Per update (`update`), as tensors under 'grad/' (|g_k| before clipping is SHAC's 'grad_norm/actor'):
    - actor_clipped: 1 if |g_k| exceeded the clip (the update was scaled down), else 0;
    - actor_clipped_fraction: the recent average of actor_clipped;
    - actor_cosine: cos(g_k, g_{k-1}), NaN at the first update;
    - actor_window_variance: E|g - E g|^2 over recent windows (the trace of the covariance) [grad^2],
      NaN before the second update;
    - actor_window_snr: |E g|^2 / actor_window_variance (signal-to-noise ratio of one window's gradient).
    Skipped (non-finite) updates leave the statistics unchanged (and report NaN).
    State lives in buffers, so checkpoints continue it exactly.
    """

    def __init__(self, num_params: int, window: int, clip: float, device: torch.device):
        super().__init__()
        self.decay, self.clip = 1.0 - 1.0 / window, clip
        f64 = dict(dtype=torch.float64, device=device)   # E|g|^2 - |E g|^2 cancels: float32 is not enough
        for name in ("previous", "mean"):
            self.register_buffer(name, torch.zeros(num_params, **f64))
        for name in ("mean_square_norm", "clipped", "weight", "updates"):
            self.register_buffer(name, torch.zeros((), **f64))

    @torch.no_grad()
    def update(self, grads: Sequence[Tensor], norm: Tensor, finite: Tensor) -> Dict[str, Tensor]:
        """`grads` of the update's parameters (before clipping), their total `norm`, whether the step was taken."""
        g = torch.cat([x.reshape(-1) for x in grads]).to(self.mean.dtype)
        norm = norm.to(g.dtype)
        clipped = (norm > self.clip).to(g.dtype)
        cosine = (g @ self.previous) / (norm * self.previous.norm())
        cosine = torch.where(self.weight > 0, cosine, torch.nan)
        d = self.decay
        updates = {"previous": g, "mean": d * self.mean + (1 - d) * g,
                   "mean_square_norm": d * self.mean_square_norm + (1 - d) * norm.square(),
                   "clipped": d * self.clipped + (1 - d) * clipped, "weight": d * self.weight + (1 - d),
                   "updates": self.updates + 1}
        for name, value in updates.items():
            buffer = getattr(self, name)
            buffer.copy_(torch.where(finite, value, buffer))
        mean = self.mean / self.weight
        nan = torch.tensor(torch.nan, dtype=g.dtype, device=g.device)
        variance = (self.mean_square_norm / self.weight - mean.square().sum()).clamp_min(0.0)
        variance = torch.where(self.updates > 1, variance, nan)
        return {"grad/actor_clipped": torch.where(finite, clipped, nan),
                "grad/actor_clipped_fraction": self.clipped / self.weight,
                "grad/actor_cosine": torch.where(finite, cosine, nan),
                "grad/actor_window_variance": variance, "grad/actor_window_snr": mean.square().sum() / variance}
