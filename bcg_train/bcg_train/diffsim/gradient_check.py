"""Checking the simulator's gradients: a batch of standing G1 poses to start from, and a tape gradient
against central finite differences along random directions (what the gradient tests run), with the
inputs as Warp arrays on the CPU."""
import functools

import numpy as np
import warp as wp


def standing_q(model, rng, n, lift=0.0):
    """(n, nq) default pose with the feet just touching (sphere bottoms about 1 mm above the ground,
    + lift [m]), the joints jittered by 0.02 rad from `rng`."""
    q = np.tile(model.default_qpos(model.robot.standing_height + 0.001 + lift), (n, 1))
    q[:, 7:] += rng.normal(0, 0.02, (n, model.nq - 7))
    return q


def directional_check(loss, x0, rng, eps=1e-6, ndir=3):
    """(max relative error, value): the tape gradient of `loss` at x0 against central differences
    along `ndir` random unit directions from `rng`. `loss(x, with_grad)` -> (value, gradient or None)."""
    value, grad = loss(x0, True)
    errs = []
    for _ in range(ndir):
        u = rng.normal(size=x0.shape)
        u /= np.linalg.norm(u)
        fd = (loss(x0 + eps * u, False)[0] - loss(x0 - eps * u, False)[0]) / (2 * eps)
        errs.append(abs(float(np.sum(grad * u)) - fd) / max(abs(fd), 1e-9))
    return max(errs), value


def with_rng(rng, n):
    """(standing_q, directional_check) drawing from `rng`, standing_q for `n` environments."""
    return functools.partial(standing_q, rng=rng, n=n), functools.partial(directional_check, rng=rng)


def array(x, requires_grad, dtype=wp.float64) -> wp.array:
    """`x` as a Warp array on the CPU (float64 unless `dtype`), with an adjoint when `requires_grad`."""
    return wp.array(x, dtype=dtype, device="cpu", requires_grad=requires_grad)
