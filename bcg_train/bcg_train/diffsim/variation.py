"""`PhysicsVariation`: changes to a Model's physics that one simulator applies on top of it (domain
randomisation), without touching the Model that other simulators share. Defaults change nothing."""
from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class PhysicsVariation:
    """nb bodies in the Model's order."""

    body_mass_offset: Optional[np.ndarray] = None
    """(nb,) kg added to each body's mass (e.g. a payload on the torso); None: none."""
    body_com_offset: Optional[np.ndarray] = None
    """(nb, 3) m added to each body's centre of mass, body frame; None: none."""
    friction_scale: float = 1.0
    """Multiplier on every foot sphere's Coulomb coefficient against the floor [-]."""

    def validate(self, body_mass: np.ndarray) -> None:
        """ValueError naming the field when a shape does not fit the model whose body masses are
        `body_mass` ((nb,) kg, on the host) or a value is not physical."""
        nb = len(body_mass)
        if self.body_mass_offset is not None:
            offset = np.asarray(self.body_mass_offset)
            if offset.shape != (nb,):
                raise ValueError(f"body_mass_offset: shape {offset.shape}, the model has {nb} bodies")
            if np.any(body_mass + offset <= 0):
                raise ValueError("body_mass_offset: would make a body's mass <= 0")
        if self.body_com_offset is not None and np.asarray(self.body_com_offset).shape != (nb, 3):
            raise ValueError(f"body_com_offset: shape {np.asarray(self.body_com_offset).shape}, expected "
                             f"({nb}, 3)")
        if not self.friction_scale > 0:
            raise ValueError(f"friction_scale: must be > 0, got {self.friction_scale!r}")
