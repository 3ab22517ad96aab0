"""Where on the reference an episode starts: uniformly (reference state initialisation, the paper's),
or where the policy fails (adaptive start sampling, as BeyondMimic's motion tracker does).

The clip's possible start frames [0, last_start] are cut into bins of `bin_s` seconds. Every control
step each environment's current frame counts one step of its bin, and each failure one failure of the
bin it happened in; both are kept on the device (no host synchronisation) and folded into decaying
averages once per window (`refresh`, one transfer). A bin's hazard is its failures per step; the
start weights spread each bin's hazard over the bins before it (a start a little before the hard part
gets there with the state the policy brings), mix it with the uniform distribution and draw a bin,
then a frame in it, with the env's own host generator.
"""
from dataclasses import dataclass

import torch

from bcg.config_check import FRACTION, NON_NEGATIVE, POSITIVE, Settings, setting


@dataclass
class AdaptiveStartConfig(Settings):
    """Adaptive start sampling (`ImitationEnvConfig.adaptive_starts`)."""

    enabled: bool = False
    """Off: every start phase equally likely (the paper's reference state initialisation)."""
    bin_s: float = setting(1.0, POSITIVE)
    """Width of a bin of start phases [s]."""
    uniform_fraction: float = setting(0.3, FRACTION)
    """Share of the starts drawn uniformly whatever the failures [-], so no phase is forgotten."""
    lead_bins: int = setting(2, NON_NEGATIVE)
    """Bins before a failing one that share its weight, halving per bin [bins]."""
    decay: float = setting(0.95, FRACTION)
    """Per window, the weight the past keeps in the failure and step averages [-]."""


class AdaptiveStarts:
    """Failure statistics per bin of start phases and the start frames drawn from them (see the
    module docstring). `last_start`: the last frame an episode may start at; `frames_per_s`: the
    reference's frame rate [1/s]."""

    def __init__(self, cfg: AdaptiveStartConfig, last_start: int, frames_per_s: float, device: torch.device):
        self.cfg, self.last_start = cfg, int(last_start)
        self.bin_frames = max(1, int(round(cfg.bin_s * frames_per_s)))
        self.num_bins = self.last_start // self.bin_frames + 1
        zeros = dict(dtype=torch.float64, device=device)
        self._window_fails = torch.zeros(self.num_bins, **zeros)
        self._window_steps = torch.zeros(self.num_bins, **zeros)
        self.fails = torch.zeros(self.num_bins, dtype=torch.float64)
        """(K,) decaying failure counts per bin, on the host."""
        self.steps = torch.zeros(self.num_bins, dtype=torch.float64)
        """(K,) decaying step counts per bin, on the host."""
        self.weights = torch.full((self.num_bins,), 1.0 / self.num_bins, dtype=torch.float64)
        """(K,) the probability of each bin's starts, on the host (uniform until the first refresh)."""

    def bins(self, frame: torch.Tensor) -> torch.Tensor:
        """(N,) long frames -> their bins (frames past the last start count in the last bin)."""
        return torch.clamp(frame // self.bin_frames, max=self.num_bins - 1)

    def record(self, frame: torch.Tensor, failed: torch.Tensor) -> None:
        """One control step: `frame` (N,) long, each environment's frame; `failed` (N,) bool, which
        failed at it. On the device, nothing read back."""
        b = self.bins(frame)
        self._window_steps.index_add_(0, b, torch.ones_like(b, dtype=torch.float64))
        self._window_fails.index_add_(0, b, failed.to(torch.float64))

    def refresh(self) -> None:
        """Fold the window's counts into the averages and recompute the start weights (one transfer)."""
        d = self.cfg.decay
        window = torch.stack([self._window_fails, self._window_steps]).cpu()
        self._window_fails.zero_()
        self._window_steps.zero_()
        self.fails = d * self.fails + window[0]
        self.steps = d * self.steps + window[1]
        self.weights = start_weights(self.fails, self.steps, self.cfg)

    def draw(self, count: int, generator: torch.Generator) -> torch.Tensor:
        """(count,) long start frames on the host: a bin by `weights`, then a frame in it."""
        b = torch.multinomial(self.weights, count, replacement=True, generator=generator)
        first = b * self.bin_frames
        width = torch.clamp(self.last_start + 1 - first, max=self.bin_frames)
        return first + (torch.rand(count, generator=generator, dtype=torch.float64) * width).long()

    def state_dict(self) -> dict:
        return {"fails": self.fails.clone(), "steps": self.steps.clone(),
                "window_fails": self._window_fails.cpu(), "window_steps": self._window_steps.cpu()}

    def load_state_dict(self, state: dict) -> None:
        if state["fails"].shape != self.fails.shape:
            raise ValueError(f"adaptive starts: a state of {state['fails'].shape[0]} bins, this clip has "
                             f"{self.num_bins}")
        self.fails, self.steps = state["fails"].clone(), state["steps"].clone()
        self._window_fails.copy_(state["window_fails"])
        self._window_steps.copy_(state["window_steps"])
        self.weights = start_weights(self.fails, self.steps, self.cfg)


def start_weights(fails: torch.Tensor, steps: torch.Tensor, cfg: AdaptiveStartConfig) -> torch.Tensor:
    """(K,) start probabilities from (K,) failure and step counts per bin: each bin's hazard (failures
    per step; 0 where nothing ran yet) shared with the `lead_bins` bins before it (weight 1/2 per bin
    back), normalised, mixed with the uniform distribution by `uniform_fraction`."""
    k = fails.shape[0]
    hazard = torch.where(steps > 0, fails / steps.clamp(min=1e-12), torch.zeros_like(fails))
    spread = hazard.clone()
    for back in range(1, int(cfg.lead_bins) + 1):
        spread[:-back] += hazard[back:] * 0.5 ** back
    uniform = torch.full_like(spread, 1.0 / k)
    total = spread.sum()
    if total <= 0:
        return uniform
    return cfg.uniform_fraction * uniform + (1 - cfg.uniform_fraction) * spread / total
