"""A running mean/std observation normaliser, exactly resumable and traceable into ONNX."""
import torch
from torch import Tensor, nn


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

    def forward(self, x: Tensor) -> Tensor:
        """(..., dim) normalised, in x's dtype; differentiable w.r.t. x."""
        return (x - self.mean.to(x.dtype)) / (self.var.sqrt() + self.eps).to(x.dtype)

    @torch.no_grad()
    def update(self, batch: Tensor) -> None:
        """Merge the rows of `batch` (B, dim) whose entries are all finite (Chan et al.'s parallel update)."""
        batch = batch.reshape(-1, self.mean.shape[0]).to(torch.float64)
        batch = batch[torch.isfinite(batch).all(dim=1)]
        n = batch.shape[0]
        if n == 0:
            return
        batch_mean = batch.mean(dim=0)
        batch_var = batch.var(dim=0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.mean += delta * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)
