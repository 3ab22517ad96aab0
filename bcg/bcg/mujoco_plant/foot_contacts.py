"""Foot-floor contacts of the G1 in MuJoCo: which of MuJoCo's contacts touch a foot sphere and the floor."""
import mujoco
import numpy as np

from bcg.robot import RobotDescription


class FootContacts:
    """Picks the contacts between a foot sphere and a world geom (the floor) out of MuJoCo's contacts."""

    def __init__(self, model: mujoco.MjModel, robot: RobotDescription):
        is_foot = np.zeros(model.ngeom, dtype=bool)
        for ids in robot.foot_geoms.values():
            is_foot[list(ids)] = True
        is_world = model.geom_bodyid == 0
        self._pair = np.outer(is_foot, is_world) | np.outer(is_world, is_foot)
        """bool (ngeom, ngeom): True for a (foot sphere, world geom) pair in either order."""

    def distances(self, data: mujoco.MjData) -> np.ndarray:
        """(k,) m, signed distance of each foot-floor contact in `data` (negative: penetrating)."""
        if not data.ncon:
            return np.zeros(0)
        geom = data.contact.geom
        return np.array(data.contact.dist[self._pair[geom[:, 0], geom[:, 1]]])
