"""1-D sanity case of Bundled Contact Gradients: a point mass falling onto z = 0 with the simulator's
smoothed impulse contact (docs/method.md, "Contact model"), written in torch float64.

Per substep h: s = 1 / (1 + exp(kappa z)) (z: height of the point [m]), free velocity
v_free = v - g h, p = 0, then ITERATIONS projected steps p <- max(0, p - (v_free + G s p) / G) with
the Delassus G = J M^-1 J^T = 1 / m (one contact, so Jacobi and Gauss-Seidel coincide), applied
impulse s p, v <- v_free + s p / m, z <- z + h v (semi-implicit Euler, as the simulator).
Unit mass (the velocity dynamics do not depend on it).

Loss f(z0) = v_T, the vertical velocity [m/s] after `steps` control steps of DT from height z0 [m]
falling at V0: a near-step from the free-fall speed to rest as the landing moves into the horizon,
so the raw gradient df/dz0 is a spike that neighbouring heights disagree on. Bundled (first-order
randomised-smoothing) estimate at z0: the mean of B raw gradients at z0 + w_i, w_i ~ N(0, sigma^2);
its expectation is the gradient of the Gaussian-convolved loss, computed here densely on a grid. The
same samples also give the zero-order estimate of that gradient and Suh et al.'s alpha-order mix of
the two (`gradient_orders`), which the study compares with the bundle's (`order_rows`).
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
    return branch_samples(z0, kappa, branches, rng, sigma)[2].mean(axis=1)


def branch_samples(z0: np.ndarray, kappa: float, branches: int, rng: np.random.Generator,
                   sigma: float = SIGMA) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of z0 (n,) [m], `branches` perturbations w ~ N(0, sigma^2) [m] and f, f' at z0 + w
    [m/s, 1/s]: (w, f, f'), each (n, branches)."""
    w = rng.normal(0.0, sigma, (len(z0), branches))
    f, g = loss_and_gradient((np.asarray(z0)[:, None] + w).ravel(), kappa)
    return w, f.reshape(w.shape), g.reshape(w.shape)


def gradient_orders(z0: np.ndarray, kappa: float, branches: int, rng: np.random.Generator,
                    sigma: float = SIGMA) -> Dict[str, np.ndarray]:
    """Three estimates of the smoothed gradient d/dz E[f(z + w)] at each of z0 (n,) [m] from the same
    B = `branches` samples w_i ~ N(0, sigma^2), each (n,) [1/s]:
    - "first": the bundle's, mean_i f'(z + w_i);
    - "zero": the zero-order one, sum_i (f(z + w_i) - mean_j f(z + w_j)) w_i / ((B - 1) sigma^2) (the
      branch mean as baseline; B / (B - 1) makes it unbiased);
    - "alpha": Suh et al.'s alpha-order mix alpha first + (1 - alpha) zero with alpha = v0 / (v0 + v1),
      v1 and v0 the sample variances of the two means (from the same B samples, so alpha is correlated
      with them: a small bias; their bias check is left out, the first-order estimate here being
      unbiased);
    - "alpha pooled": the same mix with one alpha for all n, from the variances averaged over them
      (what the simulator's `bundle.experimental.alpha_order` does over a segment's bundles);
    and "alpha_weight" (n,) [-], the per-point alpha. Needs B >= 2."""
    if branches < 2:
        raise ValueError(f"gradient_orders needs at least 2 branches, got {branches}")
    w, f, g = branch_samples(z0, kappa, branches, rng, sigma)
    zero_samples = branches / (branches - 1) * (f - f.mean(axis=1, keepdims=True)) * w / sigma ** 2
    first, zero = g.mean(axis=1), zero_samples.mean(axis=1)
    v1, v0 = g.var(axis=1, ddof=1) / branches, zero_samples.var(axis=1, ddof=1) / branches
    alpha = np.divide(v0, v0 + v1, out=np.ones_like(v0), where=v0 + v1 > 0)
    pooled = v0.mean() / (v0.mean() + v1.mean()) if v0.mean() + v1.mean() > 0 else 1.0
    return {"first": first, "zero": zero, "alpha": alpha * first + (1 - alpha) * zero,
            "alpha pooled": pooled * first + (1 - pooled) * zero, "alpha_weight": alpha}


ORDERS = ("first", "zero", "alpha", "alpha pooled")
"""The estimators `gradient_orders` compares, by name."""


def order_rows(curves: DenseCurves, repeats: int, envs: int, rng: np.random.Generator, branches: int = 10,
               z_range: Tuple[float, float] = (0.3, 0.5)) -> List[Dict]:
    """Per estimator of `gradient_orders` (B = `branches`): at z* = argmax |smoothed gradient|, over
    `repeats` estimates, the bias against the dense smoothed gradient (with its standard error) and the
    variance [1/s^2]; across `envs` heights z0 ~ U(z_range) [m], the mean squared error against the
    smoothed gradient there [1/s^2]; the median alpha."""
    i = int(np.nanargmax(np.abs(curves.smoothed)))
    at_star = gradient_orders(np.full(repeats, curves.z0[i]), curves.kappa, branches, rng)
    z0 = rng.uniform(*z_range, envs)
    across = gradient_orders(z0, curves.kappa, branches, rng)
    smoothed = np.interp(z0, curves.z0, curves.smoothed)
    if np.isnan(smoothed).any():
        raise ValueError(f"order_rows: heights {z_range} m come within 5 sigma of the curves' ends "
                         f"({curves.z0[0]:g}, {curves.z0[-1]:g}) m, where the smoothed gradient is not known")
    rows = []
    for name in ORDERS:
        est = at_star[name]
        rows.append({"kappa": curves.kappa, "estimator": name, "B": branches, "smoothed_grad": curves.smoothed[i],
                     "bias": est.mean() - curves.smoothed[i], "bias_stderr": np.sqrt(est.var(ddof=1) / repeats),
                     "variance": est.var(ddof=1), "mse_across": float(np.mean((across[name] - smoothed) ** 2)),
                     "median_alpha": float(np.median(at_star["alpha_weight"]))})
    return rows


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
