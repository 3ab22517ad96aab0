"""1-D sanity case of Bundled Contact Gradients: a point mass falling onto z = 0 with the simulator's
smoothed impulse contact (METHOD.md, "Contact model"), written in torch float64.

Per substep h: s = 1 / (1 + exp(kappa z)) (z: height of the point [m]), free velocity
v_free = v - g h, p = 0, then ITERATIONS projected steps p <- max(0, p - (v_free + G s p) / G) with
the Delassus G = J M^-1 J^T = 1 / m (one contact, so Jacobi and Gauss-Seidel coincide), applied
impulse s p, v <- v_free + s p / m, z <- z + h v (semi-implicit Euler, as the simulator).
Unit mass (the velocity dynamics do not depend on it).

Loss f(z0) = v_T, the vertical velocity [m/s] after `steps` control steps of DT from height z0 [m]
falling at V0: a near-step from the free-fall speed to rest as the landing moves into the horizon,
so the raw gradient df/dz0 is a spike that neighbouring heights disagree on. Bundled (first-order
randomised-smoothing) estimate at z0: the mean of B raw gradients at z0 + w_i, w_i ~ N(0, sigma^2);
its expectation is the gradient of the Gaussian-convolved loss, computed here densely on a grid.
"""
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

GRAVITY = 9.81          # m/s^2
DT = 0.02               # s, control step
SUBSTEPS = 4            # substeps per control step (h = 5 ms)
ITERATIONS = 10         # projected iterations per substep
V0 = -1.0               # m/s, initial vertical velocity
STEPS = 10              # control steps of the loss horizon (0.2 s)
SIGMA = 0.01            # m, perturbation std (the simulator's sigma_p)
BRANCHES = (1, 2, 4, 10, 20, 50)


def substep(z: torch.Tensor, v: torch.Tensor, kappa: float,
            h: float = DT / SUBSTEPS) -> Tuple[torch.Tensor, torch.Tensor]:
    """One substep of a batch: z, v (n,) [m, m/s] -> (z+, v+), differentiable."""
    s = torch.sigmoid(-kappa * z)
    v_free = v - GRAVITY * h
    p = torch.zeros_like(z)
    for _ in range(ITERATIONS):
        p = torch.clamp(p - (v_free + s * p), min=0.0)
    v_next = v_free + s * p
    return z + h * v_next, v_next


def loss_and_gradient(z0: np.ndarray, kappa: float, steps: int = STEPS) -> Tuple[np.ndarray, np.ndarray]:
    """f(z0) = v_T [m/s] and df/dz0 [1/s], each (n,), for initial heights z0 (n,) [m]."""
    z = torch.tensor(np.asarray(z0, dtype=np.float64), requires_grad=True)
    zt, vt = z, torch.full_like(z, V0)
    for _ in range(steps * SUBSTEPS):
        zt, vt = substep(zt, vt, kappa)
    (grad,) = torch.autograd.grad(vt.sum(), z)
    return vt.detach().numpy(), grad.numpy()


def gaussian_smoothed(grid: np.ndarray, values: np.ndarray, sigma: float, derivative: bool = False) -> np.ndarray:
    """(E_w[values(z + w)] or its derivative d/dz) at the grid points at least 5 sigma from both ends
    (NaN elsewhere), w ~ N(0, sigma^2), by quadrature on the uniform `grid` (n,)."""
    dz = grid[1] - grid[0]
    half = int(np.ceil(5 * sigma / dz))
    w = np.arange(-half, half + 1) * dz
    phi = np.exp(-0.5 * (w / sigma) ** 2)
    phi /= phi.sum()
    kernel = phi * w / sigma ** 2 if derivative else phi   # d/dz E[f(z + w)] = E[f(z + w) w] / sigma^2
    out = np.full_like(values, np.nan)
    out[half:len(grid) - half] = np.convolve(values, kernel[::-1], mode="valid")
    return out


@dataclass
class DenseCurves:
    """A kappa's loss on a grid: z0 (n,) [m], f (n,) [m/s], raw gradient (n,) [1/s], smoothed gradient
    (n,) [1/s] (E[f'(z0 + w)], NaN near the ends) and the same from d/dz E[f(z0 + w)] as a check."""

    kappa: float
    z0: np.ndarray
    f: np.ndarray
    raw: np.ndarray
    smoothed: np.ndarray
    smoothed_from_f: np.ndarray


def dense_curves(kappa: float, z_range: Tuple[float, float] = (0.15, 0.6), points: int = 9001,
                 sigma: float = SIGMA) -> DenseCurves:
    """f, its raw gradient and its Gaussian-smoothed gradient on a uniform grid of initial heights."""
    z0 = np.linspace(*z_range, points)
    f, raw = loss_and_gradient(z0, kappa)
    return DenseCurves(kappa, z0, f, raw, gaussian_smoothed(z0, raw, sigma),
                       gaussian_smoothed(z0, f, sigma, derivative=True))


def bundled_estimates(z0: np.ndarray, kappa: float, branches: int, rng: np.random.Generator,
                      sigma: float = SIGMA) -> np.ndarray:
    """Bundled gradient at each of z0 (n,) [m]: mean of `branches` raw gradients at z0 + w, (n,) [1/s]."""
    z = np.asarray(z0)[:, None] + rng.normal(0.0, sigma, (len(z0), branches))
    return loss_and_gradient(z.ravel(), kappa)[1].reshape(z.shape).mean(axis=1)


def bias_variance_rows(curves: DenseCurves, repeats: int, rng: np.random.Generator,
                       branches: Sequence[int] = BRANCHES) -> List[Dict]:
    """At z* = argmax |smoothed gradient|: for each B, the mean of `repeats` bundled estimates minus the
    dense smoothed gradient (bias, with its standard error), their variance, B x variance, and the
    distance of the dense smoothed gradient from the raw one (the smoothing bias)."""
    i = int(np.nanargmax(np.abs(curves.smoothed)))
    z_star, exact, raw = curves.z0[i], curves.smoothed[i], curves.raw[i]
    rows = []
    for b in branches:
        est = bundled_estimates(np.full(repeats, z_star), curves.kappa, b, rng)
        var = est.var(ddof=1)
        rows.append({"kappa": curves.kappa, "B": b, "z_star": z_star, "smoothed_grad": exact, "raw_grad": raw,
                     "mean_estimate": est.mean(), "bias": est.mean() - exact, "bias_stderr": np.sqrt(var / repeats),
                     "variance": var, "B_times_variance": b * var})
    return rows


def across_heights_variance(curves: DenseCurves, envs: int, rng: np.random.Generator, branches: int = 10,
                            z_range: Tuple[float, float] = (0.3, 0.5)) -> Dict:
    """The G1 study's measure in 1-D: variance across 'environments' z0 ~ U(z_range) [m] of the raw
    gradient, of the bundled one (B branches) and of the exact smoothed one (the floor the bundled
    variance falls to as B grows: what is left is the environments' real disagreement)."""
    z0 = rng.uniform(*z_range, envs)
    raw = loss_and_gradient(z0, curves.kappa)[1]
    bundled = bundled_estimates(z0, curves.kappa, branches, rng)
    smoothed = np.interp(z0, curves.z0, curves.smoothed)
    var_raw, var_bundled, var_smoothed = raw.var(ddof=1), bundled.var(ddof=1), smoothed.var(ddof=1)
    return {"kappa": curves.kappa, "envs": envs, "B": branches, "var_raw": var_raw, "var_bundled": var_bundled,
            "var_smoothed": var_smoothed, "ratio": var_raw / var_bundled, "ratio_limit": var_raw / var_smoothed}
