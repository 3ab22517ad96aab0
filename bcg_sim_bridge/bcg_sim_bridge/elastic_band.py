"""Unitree's elastic band: a spring-damper from a fixed anchor above the robot, on one body.

Modes (`BAND_MODES`), which differ only in the band's rest length:
- 'hold': the rest length is the anchor distance at the start (plus `length`): the band is just
  taut in the initial pose, so it never lifts the robot (its feet carry its weight, foot
  penetration is measured as without a band); it pulls back only as the body sinks below where it
  started, `stiffness` N per m of sinking. A soft catch, as a hand on a harness.
- 'hang': the rest length is `length` alone, as in Unitree's simulator (length 0): the G1 is lifted
  until the band carries its weight and hangs about half a metre up, as a robot hung from a crane
  before low-level control starts.
A band cannot push: shorter than its rest length it is slack and exerts nothing, and its damping
never turns the pull into a push.
"""
import mujoco
import numpy as np

from .config import BAND_MODES


def _body_id(model: mujoco.MjModel, body: str) -> int:
    body_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if body_id < 0:
        raise ValueError(f"band_body: the model has no body named {body!r}")
    return body_id


class ElasticBand:
    """Pulls body `body` towards `anchor` (world, m) through `data.xfrc_applied`.

    Force (N) along the unit vector u from the body to the anchor, while the band is stretched
    (distance > rest length): `max(0, stiffness * (distance - rest_length) - damping * (v . u)) * u`,
    v the body's linear velocity; zero while it is slack.
    """

    def __init__(self, model: mujoco.MjModel, body: str, anchor: np.ndarray,
                 stiffness: float, damping: float, rest_length: float):
        self.body = _body_id(model, body)
        if rest_length < 0:
            raise ValueError(f"band_length: the band's rest length would be {rest_length:.3f} m (< 0)")
        self.model = model
        self.anchor = np.asarray(anchor, dtype=float)
        self.stiffness, self.damping, self.rest_length = float(stiffness), float(damping), float(rest_length)
        self.attached = True
        self._vel = np.zeros(6)

    @classmethod
    def above_body(cls, model: mujoco.MjModel, data: mujoco.MjData, body: str, anchor_height: float,
                   stiffness: float, damping: float, length: float, mode: str = "hold") -> "ElasticBand":
        """A band anchored at height `anchor_height` (m) straight above `body`'s current position,
        with the rest length of `mode` ('hold': current distance + `length`; 'hang': `length`)."""
        if mode not in BAND_MODES:
            raise ValueError(f"band_mode: {mode!r} is not one of {BAND_MODES}")
        position = data.xpos[_body_id(model, body)]
        anchor = np.array([position[0], position[1], float(anchor_height)])
        start = float(np.linalg.norm(anchor - position))
        return cls(model, body, anchor, stiffness, damping, start + length if mode == "hold" else length)

    def force(self, data: mujoco.MjData) -> np.ndarray:
        """(3,) N on the body now (world frame)."""
        delta = self.anchor - data.xpos[self.body]
        distance = float(np.linalg.norm(delta))
        if distance <= self.rest_length or distance < 1e-9:
            return np.zeros(3)
        u = delta / distance
        mujoco.mj_objectVelocity(self.model, data, mujoco.mjtObj.mjOBJ_BODY, self.body, self._vel, 0)
        speed = float(np.dot(self._vel[3:], u))
        return max(0.0, self.stiffness * (distance - self.rest_length) - self.damping * speed) * u

    def apply(self, data: mujoco.MjData) -> None:
        """Set this step's band force from the body's current position and velocity."""
        if self.attached:
            data.xfrc_applied[self.body, :3] = self.force(data)

    def release(self, data: mujoco.MjData) -> None:
        """Detach the band: no more force on the body."""
        self.attached = False
        data.xfrc_applied[self.body, :3] = 0.0
