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
from typing import Any, Callable, Dict, Tuple

import mujoco
import numpy as np

from bcg.config_check import NON_NEGATIVE, POSITIVE, Rule, between, check_value, config_error, one_of

CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}


def _friction(model: mujoco.MjModel, value: float) -> None:
    model.geom_friction[:, 0] = value


def _torsion(model: mujoco.MjModel, value: float) -> None:
    model.geom_condim[:] = 4
    model.geom_friction[:, 1] = value


def _solref(model: mujoco.MjModel, value: float) -> None:
    model.geom_solref[:, 0] = value


def _cone(model: mujoco.MjModel, value: str) -> None:
    model.opt.cone = CONES[value]


def _self_collision(model: mujoco.MjModel, value: int) -> None:
    if value == 0:
        _world_only(model)


CHANGES: Dict[str, Tuple[type, Rule, Callable[[mujoco.MjModel, Any], None]]] = {
    "friction": (float, POSITIVE, _friction),
    "torsion": (float, NON_NEGATIVE, _torsion),
    "solref": (float, POSITIVE, _solref),
    "cone": (str, one_of(*CONES), _cone),
    "self_collision": (int, between(0, 1), _self_collision),
}
"""key -> (its type, its rule, how it changes a model)."""


def apply_contact(model: mujoco.MjModel, changes: Dict[str, object]) -> None:
    """Change `model`'s contact in place, key by key (`CHANGES`); a key or value that is not one of
    them is a ConfigError (a ValueError) naming it (`bcg.config_check`)."""
    for key, value in changes.items():
        if key not in CHANGES:
            raise config_error(key, value, "unknown contact key", f"one of {', '.join(CHANGES)}")
        hint, rule, change = CHANGES[key]
        change(model, check_value(key, value, hint, rule))


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
