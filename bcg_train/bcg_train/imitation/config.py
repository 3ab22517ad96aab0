"""Typed configuration of the G1 imitation environment (the `env` section of a training preset)."""
from dataclasses import dataclass, field
from typing import Tuple

from bcg_train.diffsim import BundleConfig


class EnvConfigError(ValueError):
    """An environment setting is invalid; the message names the key."""


@dataclass
class ImitationEnvConfig:
    """Units in brackets."""

    control_period_s: float = 0.02
    """Policy period [s] (50 Hz); the simulator takes `substeps` substeps per period."""
    substeps: int = 4
    """Physics substeps per control period (200 Hz)."""
    kappa: float = 300.0
    """Contact stiffness [1/m] of the smoothed impulse contact (METHOD.md)."""
    contact_iterations: int = 10
    """Projected Gauss-Seidel sweeps per substep."""
    bundle: BundleConfig = field(default_factory=lambda: BundleConfig(enabled=True))
    """Bundled Contact Gradients: on in the presets the paper's results use."""
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
        def check(ok: bool, key: str, what: str) -> None:
            if not ok:
                raise EnvConfigError(f"env.{key}: {what}, got {getattr(self, key)!r}")
        for key in ("control_period_s", "kappa", "action_scale", "episode_length_s", "termination_body_error",
                    "motion_duration_s"):
            check(getattr(self, key) > 0, key, "must be > 0")
        for key in ("kp_scale", "kd_scale", "termination_height", "action_rate_scale"):
            check(getattr(self, key) >= 0, key, "must be >= 0")
        for key in ("substeps", "contact_iterations"):
            check(isinstance(getattr(self, key), int) and getattr(self, key) >= 1, key, "must be an integer >= 1")
        check(len(self.reference_frames) > 0 and all(int(f) >= 1 for f in self.reference_frames), "reference_frames",
              "must be a non-empty list of frames >= 1")
        try:
            self.bundle.validate()
        except ValueError as e:
            raise EnvConfigError(f"env.bundle: {e}") from None
