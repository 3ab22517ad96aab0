"""`Bundler`: what the simulator calls of its bundling, whichever bundler it built (bundling.host_bundler:
the open bundles kept on the host; bundling.device_bundler: on the device, `bundle.on_device`), and
what both bundlers share: their counters (`BundleStats`), the seed stride of their perturbations,
the arguments of options that are off, and the row helpers of their kernels."""
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import warp as wp

from ..kernels.launch import LaunchSites
from ..precision import ScalarTypes
from ..state import Control, State
from .kernels import NOISE_PER_ROW, BundlingKernels

SEED_STRIDE = 1_000_003
"""Multiplier of the configured seed in each perturbation event's seed (seed x stride + event count):
a prime, so that the streams of neighbouring seeds do not overlap within the first million events."""


@dataclass
class BundleStats:
    """Counters since the simulator was built (or `reset`), the B in use and the last measured spread,
    for training logs."""

    env_substeps: int = 0
    """Environment-substeps simulated (N per substep)."""
    bundled_env_substeps: int = 0
    """Environment-substeps spent inside a bundle."""
    branch_substeps: int = 0
    """Branch-substeps simulated, re-runs included (the extra compute of bundling)."""
    bundles: int = 0
    """Bundles opened."""
    reperturbations: int = 0
    """Branch legs perturbed again on a new contact inside a bundle."""
    skipped_events: int = 0
    """Environment-substeps whose event opened no bundle because `max_branch_rows` left too few rows free
    (an environment refused again at its next substeps counts again each time)."""
    released: int = 0
    """Bundles ended before their H steps because no branch's foot was above the threshold any more
    (`end_when_released`)."""
    branches: int = 0
    """B of the bundles opened next (the configured B, or the one `auto_branches` chose)."""
    branch_rse: float = float("nan")
    """Relative standard error of the bundles' mean gradient in the last segment that measured one
    (sqrt(sum of squared standard errors / sum of squared means) over its bundles) [-]."""
    approach_speed: float = float("nan")
    """Mean approach speed towards the floor of the feet perturbed since the segment before that measured
    a spread, at their events (what `auto_sigma` scales the velocity std by) [m/s]."""
    alpha: float = float("nan")
    """With `alpha_order`: the weight of the first-order estimate that the next segment's bundles use, a
    running mean (`alpha_memory`) over the segments that measured it of v0 / (v0 + v1), the variances of
    both estimates pooled over a segment's bundles (1: first-order only, 0: zero-order only) [-]."""
    branch_top_share: float = float("nan")
    """In the same segment, the mean over bundles of the largest branch's share of sum_i |g_i|^2 (g_i
    a branch's gradient: 1/B when the branches agree, 1 when one carries it all) [-]."""

    @property
    def triggered_fraction(self) -> float:
        """Fraction of environment-substeps inside a bundle."""
        return self.bundled_env_substeps / self.env_substeps if self.env_substeps else 0.0


def gather_control(sites: LaunchSites, kernels: BundlingKernels, env_of_row: wp.array, control: Control, out: Control,
                   tape) -> None:
    """out (rows) <- row i the control of environment env_of_row[i] (`kernels.gather_control`, on `tape`)."""
    sites(kernels.gather_control, (env_of_row.shape[0], out.q_target.shape[1]), [
        env_of_row, control.q_target, control.qd_target, control.kp, control.kd, control.tau,
        out.q_target, out.qd_target, out.kp, out.kd, out.tau], tape)


class Unused:
    """Arguments of the bundling kernels for options that are off, on `device`, floats in `types`' precision:
    a probe (kernels.branch_mean), a zero seed offset (kernels.foot_perturbation's seed is then its number)
    and the kept noise, response and stds (kernels.foot_perturbation without keep_noise)."""

    def __init__(self, device, types: ScalarTypes):
        real = types.real
        self.probe = wp.zeros(1, dtype=real, device=device)
        self.seed_offset = wp.zeros(1, dtype=wp.int32, device=device)
        self.noise = (wp.zeros((1, NOISE_PER_ROW), dtype=real, device=device),
                      wp.zeros((1, 1, 3), dtype=real, device=device), wp.zeros((1, 4), dtype=real, device=device))



class Bundler(ABC):
    """The open bundles and the bundled substep of one simulator, which builds one bundler when
    `bundle.enabled` (`HostBundler`, or `DeviceBundler` with `bundle.on_device`) and calls only this.
    What the training loop reads: `stats`, `state_dict`, `load_state_dict`, `reset`,
    `clamped_perturbations`, `recorded`."""

    stats: BundleStats
    """The counters (see `BundleStats`)."""
    recorded: Optional[List[Tuple[np.ndarray, np.ndarray]]]
    """When a list: the perturbations (dq, dqd), (rows, nv) each, are appended in the order the host's
    bundler re-runs their rows (`HostBundler.replay` reads them back)."""
    capturable: bool = False
    """Its substeps launch the same kernels on the same buffers whatever lands and ask the host nothing:
    a step can be captured as a graph (diffsim.step_graphs)."""
    loads_at_cut: bool = False
    """`load_state_dict` restores what a segment's first substep reads: load it only at a segment's cut."""

    @abstractmethod
    def substep(self, s_in: State, s_out: Optional[State], control: Control, h: float, sites: LaunchSites,
                tape: Optional[wp.Tape], position: int, first: bool) -> State:
        """One bundled substep of h [s] from s_in (N rows) into s_out, or when s_out is None (with
        gradients, a step's substep but the last) into a state of the bundler's own; returns the state
        written. `sites`: the substep's launch sites; `tape` as in `Substep.run`; `position`: the
        substep's index in the segment (0 without gradients); `first`: the step's first substep (the
        bundles of the environments `restart` named close before it)."""

    @abstractmethod
    def restart(self, env_ids: List[int]) -> None:
        """The bundles of `env_ids` close at the next step's first substep (the simulator calls it
        before a step's launches, also before a captured step replays)."""

    @abstractmethod
    def at_cut(self) -> None:
        """The segment is cut (its backward pass is done): read what the bundler measures per segment
        (the simulator registers it with `Segment.before_cut`)."""

    @abstractmethod
    def reset(self) -> None:
        """Close every bundle and zero the counters and the noise stream: the simulator then bundles
        exactly as a new one."""

    @property
    @abstractmethod
    def clamped_perturbations(self) -> int:
        """Leg perturbations in which a joint clamp (max_dq, max_dqd) cut the mapped foot motion, since
        the simulator was built (or `reset`); a host sync."""

    @abstractmethod
    def state_dict(self) -> dict:
        """What a later substep depends on (open bundles, branch rows, counters, the noise stream's
        position), as numpy arrays and numbers."""

    @abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` of a bundler of the same kind and settings (ValueError, with nothing
        restored, otherwise)."""


FIELDS = ("q", "qd", "contact_impulse", "contact_height")


def state_fields(s: State):
    return tuple(getattr(s, name) for name in FIELDS)


def rows_of(s: State, start: int, stop: int) -> State:
    """Rows start..stop-1 of `s`, a view (adjoints included)."""
    return State(*(a[start:stop] for a in state_fields(s)))
