"""MuJoCo's contact, varied: a G1 model's floor and foot contact changed in place, to ask whether a
policy's fall (or survival) in MuJoCo hinges on MuJoCo's own contact parameters
(bench/mujoco_contact_sensitivity.py).

Keys: `friction`, the sliding coefficient of every geom (MuJoCo combines a pair's with max(), so this
sets the feet against the floor) [-]; `torsion`, condim 4 with that torsional coefficient [m];
`solref`, every geom's contact time constant (MuJoCo's default 0.02 s; smaller is stiffer) [s];
`cone`, the friction cone (pyramidal, MuJoCo's default, or elliptic); `self_collision`, 0 to stop
the robot's bodies colliding with each other (they still collide with the world), as in the training
simulator, which has no self-collision (1: as the model says).
"""
from typing import Dict

import mujoco
import numpy as np

CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}


def apply_contact(model: mujoco.MjModel, changes: Dict[str, object]) -> None:
    """Change `model`'s contact in place: friction (sliding coefficient of every geom, > 0), torsion
    (condim 4 and that torsional coefficient [m], >= 0), solref (time constant of every geom [s], > 0),
    cone (pyramidal or elliptic), self_collision (0 or 1). ValueError naming the key on anything else."""
    for key, value in changes.items():
        if key == "self_collision":
            if value not in (0, 1) or isinstance(value, bool):
                raise ValueError(f"self_collision: expected 0 or 1, got {value!r}")
            if value == 0:
                _world_only(model)
            continue
        if key == "cone":
            if value not in CONES:
                raise ValueError(f"cone: expected one of {sorted(CONES)}, got {value!r}")
            model.opt.cone = CONES[value]
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"{key}: expected a number, got {value!r}")
        if key == "friction" and value > 0:
            model.geom_friction[:, 0] = value
        elif key == "torsion" and value >= 0:
            model.geom_condim[:] = 4
            model.geom_friction[:, 1] = value
        elif key == "solref" and value > 0:
            model.geom_solref[:, 0] = value
        elif key in ("friction", "torsion", "solref"):
            raise ValueError(f"{key}: out of range, got {value!r}")
        else:
            raise ValueError(f"unknown contact key {key!r} (friction, torsion, solref, cone, self_collision)")


def _world_only(model: mujoco.MjModel) -> None:
    """Geoms of bodies other than the world collide with the world's geoms only: their contype is a
    bit that no world geom's contype has, their conaffinity the world geoms' contypes (MuJoCo
    collides a pair when either's contype meets the other's conaffinity)."""
    moving = model.geom_bodyid != 0
    world_types = int(np.bitwise_or.reduce(model.geom_contype[~moving], initial=0))
    free = next(1 << b for b in range(31) if not world_types & (1 << b))
    collides = (model.geom_contype[moving] != 0) | (model.geom_conaffinity[moving] != 0)
    model.geom_contype[moving] = np.where(collides, free, 0)
    model.geom_conaffinity[moving] = np.where(collides, world_types, 0)
