"""Quaternion maths on numpy arrays or torch tensors alike (batched over any leading shape), shared by
the policy's observation (training and the node) and the node's safety checks. Quaternions are
(w, x, y, z) and rotate frame vectors into the world. Plain numpy: importing it loads nothing else.
"""
import numpy as np


def array_namespace(x):
    """The array namespace of `x`: torch for tensors (imported only then), else numpy."""
    if type(x).__module__.startswith("torch"):
        import torch
        return torch
    return np


def stack_last(xp, parts):
    """xp.stack(parts, -1). numpy builds it with one array() call: np.stack spends ~7 us on the
    scalars of a single observation, which the node builds on its latency path."""
    if xp is np:
        stacked = np.array(parts)
        return stacked.transpose(tuple(range(1, stacked.ndim)) + (0,))
    return xp.stack(parts, -1)


def quat_rotate_inverse(q, v):
    """Rotate world vectors v (..., 3) into the frame of quaternions q (..., 4) (w, x, y, z)."""
    xp = array_namespace(v)
    w, u = q[..., 0:1], q[..., 1:4]
    uv = xp.stack([u[..., 1] * v[..., 2] - u[..., 2] * v[..., 1],
                   u[..., 2] * v[..., 0] - u[..., 0] * v[..., 2],
                   u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]], -1)
    uuv = xp.stack([u[..., 1] * uv[..., 2] - u[..., 2] * uv[..., 1],
                    u[..., 2] * uv[..., 0] - u[..., 0] * uv[..., 2],
                    u[..., 0] * uv[..., 1] - u[..., 1] * uv[..., 0]], -1)
    return v - 2.0 * w * uv + 2.0 * uuv


def projected_gravity(q):
    """The world's down vector (0, 0, -1) in the frame of quaternions q (..., 4) (w, x, y, z): minus
    the last row of q's rotation matrix, (..., 3). q must be a unit quaternion."""
    xp = array_namespace(q)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return stack_last(xp, [2 * (w * y - x * z), -2 * (y * z + w * x), 2 * (x * x + y * y) - 1])


def rotation_matrix(q):
    """Rotation matrices (..., 3, 3) of unit quaternions q (..., 4) (w, x, y, z)."""
    xp = array_namespace(q)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return stack_last(xp, [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]
                       ).reshape(tuple(q.shape[:-1]) + (3, 3))


def rot6d(q):
    """First two columns of the rotation matrix of q (..., 4), flattened to (..., 6)."""
    xp = array_namespace(q)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return stack_last(xp, [1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y),
                            2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)])


def heading(q):
    """Yaw [rad] of quaternions q (..., 4) (w, x, y, z): the angle about the world's vertical from
    the world's x axis to the frame's x axis projected on the floor, in (-pi, pi]."""
    xp = array_namespace(q)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return xp.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def turned_about_vertical(q, angle):
    """Quaternions q (..., 4) (w, x, y, z) turned by `angle` [rad] (a scalar or (...)) about the
    world's vertical: R_z(angle) R(q). Their heading grows by `angle`; roll and pitch stay."""
    xp = array_namespace(q)
    c, s = xp.cos(0.5 * angle), xp.sin(0.5 * angle)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return stack_last(xp, [c * w - s * z, c * x - s * y, c * y + s * x, c * z + s * w])


def tilted_about_horizontal(q, axis_angle, tilt):
    """Quaternions q (..., 4) (w, x, y, z) tilted by `tilt` [rad] about the world's horizontal axis
    (cos axis_angle, sin axis_angle, 0) (`axis_angle` [rad]; both scalars or (...)): R_axis(tilt) R(q).
    An upright frame ends `tilt` from upright; the heading changes only to second order."""
    xp = array_namespace(q)
    c, s = xp.cos(0.5 * tilt), xp.sin(0.5 * tilt)
    a, b = s * xp.cos(axis_angle), s * xp.sin(axis_angle)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return stack_last(xp, [c * w - a * x - b * y, c * x + a * w + b * z, c * y - a * z + b * w, c * z + a * y - b * x])
