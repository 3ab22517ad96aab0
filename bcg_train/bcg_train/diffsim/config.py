"""Typed configuration of the differentiable simulator."""
from dataclasses import dataclass


@dataclass
class SimConfig:
    """Contact and integration settings (units in brackets)."""

    kappa: float = 300.0
    """Contact stiffness k [1/m] of the smoothing s_k(c) = 1 / (1 + exp(k c)), c = sphere height above ground."""
    contact_iterations: int = 10
    """Projected Jacobi iterations on the contact impulses per substep."""
    substeps: int = 4
    """Substeps per `step` call (control 50 Hz, physics 200 Hz by default)."""
    frictionloss_scale: float = 1.0
    """Multiplier on the model's joint friction loss (0 turns it off)."""
    frictionloss_velocity: float = 0.02
    """Velocity scale [rad/s] of the smooth Coulomb friction loss -F tanh(qd / v)."""
    limit_stiffness: float = 0.2
    """Joint-limit spring, as a fraction of the stable stiffness A_ii / h^2 of the dof [-]."""
    limit_damping: float = 0.5
    """Joint-limit damper, as a fraction of A_ii / h [-], active only beyond the limit."""

    def validate(self) -> None:
        for name in ("kappa", "frictionloss_velocity"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SimConfig.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("contact_iterations", "substeps"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"SimConfig.{name} must be an integer >= 1, got {v!r}")
        for name in ("frictionloss_scale", "limit_stiffness", "limit_damping"):
            if getattr(self, name) < 0:
                raise ValueError(f"SimConfig.{name} must be >= 0, got {getattr(self, name)!r}")
