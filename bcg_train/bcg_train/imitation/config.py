"""Typed configuration of the G1 imitation environment (the `env` section of a training preset)."""
from dataclasses import dataclass, field
from typing import Tuple

from bcg.config_check import check, require_non_negative, require_positive, validate_section
from bcg_train.diffsim.config import BundleConfig, SimConfig


@dataclass
class ImitationEnvConfig:
    """Units in brackets."""

    control_period_s: float = 0.02
    """Policy period [s] (50 Hz); the simulator takes `sim.substeps` substeps per period."""
    sim: SimConfig = field(default_factory=lambda: SimConfig(bundle=BundleConfig(enabled=True)))
    """The simulator: contact stiffness `sim.kappa` [1/m], substeps, solver constants, and bundling
    (on in the presets the paper's results use). Steps without gradients run it with bundling off."""
    kp_scale: float = 1.0
    """Multiplier on the description's PD stiffness (config/g1.yaml) [-]; the exported contract carries the product."""
    kd_scale: float = 1.0
    """Multiplier on the description's PD damping [-]."""
    action_scale: float = 0.25
    """Joint target = default pose + action_scale * action [rad per unit action]."""
    reference_frames: Tuple[int, ...] = (1, 2, 3)
    """Future reference frames in the observation [control periods ahead]."""
    episode_length_s: float = 10.0
    """Time limit of an episode [s] (also ends at the end of the reference motion): a time-out, not a failure."""
    termination_height: float = 0.3
    """Failure when the pelvis is below this height [m]."""
    termination_body_error: float = 0.5
    """Failure when the mean body position error to the reference exceeds this [m]."""
    action_rate_scale: float = 0.8
    """Weight of the action-rate penalty (METHOD.md's 0.8) on the joint targets' change per control
    step: -w sum_j (action_scale (a_j - a_prev_j))^2 [rad^2]."""
    motion_duration_s: float = 15.0
    """Length of a built-in synthetic motion [s]."""

    def validate(self) -> None:
        """ConfigError naming the key (relative to this section: 'sim.kappa: ...')."""
        require_positive(self, "control_period_s", "action_scale", "episode_length_s", "termination_body_error",
                         "motion_duration_s")
        require_non_negative(self, "kp_scale", "kd_scale", "termination_height", "action_rate_scale")
        check(len(self.reference_frames) > 0 and all(int(f) >= 1 for f in self.reference_frames), "reference_frames",
              f"must be a non-empty list of frames >= 1, got {list(self.reference_frames)!r}")
        validate_section("sim", self.sim)
