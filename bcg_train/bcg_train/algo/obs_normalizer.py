"""A running mean/std observation normaliser, exactly resumable and traceable into ONNX."""
import torch
from torch import Tensor, nn

from .data_parallel import Ranks


class RunningObsNormalizer(nn.Module):
    """normalise(x) = (x - mean) / (std + eps), statistics over every observation seen.

    Statistics are float64 buffers (in `state_dict`, so a checkpoint restores them bit-exactly);
    they change only in `update`, never inside `forward`, so a window sees fixed statistics and the
    exported graph computes exactly what training computed.
    """

    def __init__(self, dim: int, eps: float = 1e-2):
        super().__init__()
        self.eps = eps
        """Added to the std (rsl_rl's EmpiricalNormalization uses 1e-2): bounds the gain on
        near-constant observation entries to 1 / eps."""
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def load_with_entries_appended(self, state: dict) -> None:
        """Load the `state_dict` of a normaliser of fewer entries, which are the first of these; the
        entries after them start at mean 0 and variance 1 with the same count."""
        extra = self.mean.shape[0] - state["mean"].shape[0]
        self.load_state_dict({"mean": torch.cat([state["mean"], state["mean"].new_zeros(extra)]),
                              "var": torch.cat([state["var"], state["var"].new_ones(extra)]), "count": state["count"]})

    def forward(self, x: Tensor) -> Tensor:
        """(..., dim) normalised, in x's dtype; differentiable w.r.t. x."""
        return (x - self.mean.to(x.dtype)) / (self.var.sqrt() + self.eps).to(x.dtype)

    @torch.no_grad()
    def update(self, batch: Tensor, ranks: Ranks) -> None:
        """Merge the rows of `batch` (B, dim) whose entries are all finite, of every rank (their mean,
        then the squared deviations from it, summed over ranks; Chan et al.'s parallel update into the
        running statistics). No host synchronisation beyond selecting the finite rows."""
        batch = batch.reshape(-1, self.mean.shape[0]).to(torch.float64)
        batch = batch[torch.isfinite(batch).all(dim=1)]
        sums = torch.cat([batch.new_full((1,), batch.shape[0]), batch.sum(dim=0)])
        ranks.sum_([sums])
        n = sums[0]
        batch_mean = sums[1:] / n.clamp_min(1.0)
        m2 = (batch - batch_mean).square().sum(dim=0)
        ranks.sum_([m2])
        total = self.count + n
        divisor = total.clamp_min(1.0)
        delta = batch_mean - self.mean
        var = (self.var * self.count + m2 + delta.square() * self.count * n / divisor) / divisor
        seen = n > 0
        self.mean.copy_(torch.where(seen, self.mean + delta * n / divisor, self.mean))
        self.var.copy_(torch.where(seen, var, self.var))
        self.count.copy_(total)
