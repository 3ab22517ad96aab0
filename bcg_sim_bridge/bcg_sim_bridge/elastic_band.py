"""Unitree's elastic band: a spring-damper from a fixed anchor that holds the robot up at start."""
import mujoco
import numpy as np


class ElasticBand:
    """Pulls body `body` towards `anchor` (world, m) through `data.xfrc_applied`.

    Force (N) along the unit vector u from the body to the anchor:
    `(stiffness * (distance - length) - damping * (v . u)) * u`, v the body's linear velocity.
    """

    def __init__(self, model: mujoco.MjModel, body: str, anchor: np.ndarray,
                 stiffness: float, damping: float, length: float):
        self.body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
        if self.body < 0:
            raise ValueError(f"band_body: the model has no body named {body!r}")
        self.model = model
        self.anchor = np.asarray(anchor, dtype=float)
        self.stiffness, self.damping, self.length = float(stiffness), float(damping), float(length)
        self.attached = True
        self._vel = np.zeros(6)

    @classmethod
    def above_body(cls, model: mujoco.MjModel, data: mujoco.MjData, body: str, anchor_height: float,
                   stiffness: float, damping: float, length: float) -> "ElasticBand":
        """A band anchored at height `anchor_height` (m) straight above `body`'s current position."""
        band = cls(model, body, np.zeros(3), stiffness, damping, length)
        band.anchor = np.array([data.xpos[band.body, 0], data.xpos[band.body, 1], float(anchor_height)])
        return band

    def apply(self, data: mujoco.MjData) -> None:
        """Set this step's band force from the body's current position and velocity."""
        if not self.attached:
            return
        delta = self.anchor - data.xpos[self.body]
        distance = float(np.linalg.norm(delta))
        if distance < 1e-9:
            data.xfrc_applied[self.body, :3] = 0.0
            return
        u = delta / distance
        mujoco.mj_objectVelocity(self.model, data, mujoco.mjtObj.mjOBJ_BODY, self.body, self._vel, 0)
        speed = float(np.dot(self._vel[3:], u))
        data.xfrc_applied[self.body, :3] = (self.stiffness * (distance - self.length) - self.damping * speed) * u

    def release(self, data: mujoco.MjData) -> None:
        """Detach the band: no more force on the body."""
        self.attached = False
        data.xfrc_applied[self.body, :3] = 0.0
