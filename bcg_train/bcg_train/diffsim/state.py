"""State and Control of the differentiable simulator (N environments; floats in the Model's precision)."""
from dataclasses import dataclass

import numpy as np
import warp as wp


@dataclass
class State:
    """q (N, nq): base position [m], base quaternion (w x y z), hinge angles [rad];
    qd (N, nv): base linear velocity (world) [m/s], base angular velocity (body) [rad/s], hinge rates
    [rad/s]; contact_impulse (N, nc) vec3: applied impulse of each foot sphere in the last substep,
    (normal, x, y) [N s]; contact_height (N, nc): height of each sphere's lowest point [m]."""

    q: wp.array
    qd: wp.array
    contact_impulse: wp.array
    contact_height: wp.array

    @classmethod
    def zeros(cls, model, num_envs: int, requires_grad: bool = False) -> "State":
        def z(*shape):
            return wp.zeros(shape, dtype=model.types.real, device=model.device, requires_grad=requires_grad)
        impulse = wp.zeros((num_envs, model.nc), dtype=model.types.vec3, device=model.device,
                           requires_grad=requires_grad)
        return cls(z(num_envs, model.nq), z(num_envs, model.nv), impulse, z(num_envs, model.nc))

    @property
    def num_envs(self) -> int:
        return self.q.shape[0]

    def zero_gradients(self) -> None:
        """Zero the adjoints of the fields that have them."""
        _zero_adjoints(self.q, self.qd, self.contact_impulse, self.contact_height)

    def assign(self, q: np.ndarray, qd: np.ndarray = None) -> "State":
        """Set q (N, nq) or (nq,) and qd (N, nv) or (nv,) from host arrays (broadcast over envs)."""
        _assign(self.q, q)
        if qd is not None:
            _assign(self.qd, qd)
        return self


@dataclass
class Control:
    """Per joint (N, nj), in the robot description's joint order: PD targets q_target [rad],
    qd_target [rad/s], gains kp [N m/rad], kd [N m s/rad], feed-forward tau [N m]. The applied torque
    tau + kp (q_target - q) + kd (qd_target - qd) is clamped to the actuator limits every substep.
    Pure torque control: kp = kd = 0."""

    q_target: wp.array
    qd_target: wp.array
    kp: wp.array
    kd: wp.array
    tau: wp.array

    @classmethod
    def zeros(cls, model, num_envs: int, requires_grad: bool = False) -> "Control":
        def z():
            return wp.zeros((num_envs, model.nj), dtype=model.types.real, device=model.device,
                            requires_grad=requires_grad)
        return cls(z(), z(), z(), z(), z())

    def zero_gradients(self) -> None:
        """Zero the adjoints of the fields that have them."""
        _zero_adjoints(self.q_target, self.qd_target, self.kp, self.kd, self.tau)

    def set_pd(self, q_target=None, kp=None, kd=None, qd_target=None, tau=None) -> "Control":
        """Assign any of the fields from host arrays of shape (nj,) or (N, nj)."""
        for name, value in (("q_target", q_target), ("kp", kp), ("kd", kd), ("qd_target", qd_target), ("tau", tau)):
            if value is not None:
                _assign(getattr(self, name), value)
        return self


def _assign(arr: wp.array, value) -> None:
    """arr <- the host array `value` broadcast to arr's shape, in arr's precision."""
    arr.assign(np.broadcast_to(np.asarray(value, dtype=wp.dtype_to_numpy(arr.dtype)), arr.shape).copy())


def _zero_adjoints(*arrays) -> None:
    """Zero the adjoint of each of `arrays` that has one (None entries skipped)."""
    for arr in arrays:
        if arr is not None and arr.grad is not None:
            arr.grad.zero_()
