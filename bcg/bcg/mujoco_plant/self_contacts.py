"""Contacts of the robot with itself in MuJoCo (two of its bodies touching, e.g. a foot striking the
other knee in a crossing step); the training simulator has none, so they are worth counting."""
import mujoco
import numpy as np


def self_contacts(model: mujoco.MjModel, data: mujoco.MjData) -> int:
    """Number of MuJoCo's contacts in `data` between two geoms of bodies other than the world."""
    bodies = model.geom_bodyid[data.contact.geom[:data.ncon]]        # (ncon, 2)
    return int(np.count_nonzero((bodies != 0).all(axis=1)))
