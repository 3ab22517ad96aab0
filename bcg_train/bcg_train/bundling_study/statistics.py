"""Statistics of the bundling study: summed per-environment gradient variance, bootstrap intervals on
resampled environments, trimmed variance, the rows the report tabulates, and how far independent
gradients agree in direction (bench/gradient_consistency.py)."""
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from .window import WindowResult

TRIM = 0.05                 # fraction of outlying environments dropped by the trimmed variance


def sum_variance(g: np.ndarray) -> float:
    """sum_k Var_e[g_{e,k}] of g (E, K...), unbiased across environments (axis 0)."""
    g = g.reshape(len(g), -1)
    return float(g.var(axis=0, ddof=1).sum())


def bootstrap_sum_variance(g: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """sum_k Var_e of g (E, K...) over each bootstrap resample of the environments, given as counts
    (R, E) (how often each env is drawn; E draws): (R,). Exact, in one matrix product."""
    g = g.reshape(len(g), -1)
    g = g - g.mean(axis=0)                       # variance is shift-invariant; less cancellation
    e = g.shape[0]
    mean = counts @ g / e                        # (R, K) resample means
    second = counts @ np.square(g).sum(axis=1) / e
    return (second - np.square(mean).sum(axis=1)) * e / (e - 1)


def direction_consistency(g: np.ndarray) -> dict:
    """How far K gradient vectors g (K, P...), K >= 2, agree in direction: "cosine" (mean pairwise cosine,
    1 = all parallel, about 0 for independent noise), "cosine_se" (its standard error over the pairs),
    "signal_fraction" (|mean g| / mean |g|: 1 for identical vectors, about 1/sqrt(K) for noise), and
    "norm_mean" / "norm_max" of |g|."""
    g = g.reshape(len(g), -1).astype(np.float64)
    if len(g) < 2:
        raise ValueError(f"direction_consistency: needs at least 2 vectors, got {len(g)}")
    norms = np.linalg.norm(g, axis=1)
    unit = g / np.maximum(norms, 1e-300)[:, None]
    cos = (unit @ unit.T)[np.triu_indices(len(g), k=1)]
    return {"cosine": float(cos.mean()),
            "cosine_se": float(cos.std(ddof=1) / np.sqrt(len(cos))) if len(cos) > 1 else float("nan"),
            "signal_fraction": float(np.linalg.norm(g.mean(axis=0)) / norms.mean()),
            "norm_mean": float(norms.mean()), "norm_max": float(norms.max())}


def resample_counts(envs: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, envs) draw counts of bootstrap resamples (envs draws with replacement each)."""
    idx = rng.integers(0, envs, (resamples, envs))
    return np.stack([np.bincount(row, minlength=envs) for row in idx]).astype(np.float64)


def interval(samples: np.ndarray) -> Tuple[float, float]:
    """95 % percentile interval of bootstrap samples."""
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return float(lo), float(hi)


def trimmed_sum_variance(g: np.ndarray, fraction: float = TRIM) -> float:
    """sum_k Var_e over the environments left after dropping the ceil(fraction E) farthest (L2) from the
    coordinate-wise median gradient: the variance of the typical environments, without the outliers."""
    g = g.reshape(len(g), -1)
    dist = np.square(g - np.median(g, axis=0)).sum(axis=1)
    keep = np.argsort(dist)[:len(g) - int(np.ceil(fraction * len(g)))]
    return sum_variance(g[keep])


def top_env_share(g: np.ndarray) -> float:
    """Share of sum_k Var_e[g_{e,k}] contributed by the single most deviant environment."""
    g = g.reshape(len(g), -1)
    dev = np.square(g - g.mean(axis=0)).sum(axis=1)
    return float(dev.max() / dev.sum())


@dataclass
class VarianceRow:
    """One (scenario, kappa, configuration) measurement; *_lo / *_hi: 95 % bootstrap interval; ratios:
    no-bundle variance over this configuration's, bootstrapped on the same resamples."""

    table: str
    scenario: str
    kappa: float
    config: str
    envs: int
    var_params: float
    var_params_lo: float
    var_params_hi: float
    var_actions: float
    var_actions_lo: float
    var_actions_hi: float
    ratio_params: float
    ratio_params_lo: float
    ratio_params_hi: float
    ratio_actions: float
    ratio_actions_lo: float
    ratio_actions_hi: float
    top_env_share_params: float
    var_params_trimmed: float
    ratio_params_trimmed: float
    mean_loss: float
    bundles: int
    triggered_fraction: float
    branch_substeps: int
    env_substeps: int
    seconds: float


def variance_row(table: str, scenario: str, kappa: float, config: str, res: WindowResult, ref: WindowResult,
                 counts: np.ndarray) -> VarianceRow:
    """The row of `res`, with ratios against `ref` (the no-bundle run on the same environments)."""
    out = {}
    for kind in ("params", "actions"):
        g, g_ref = getattr(res, f"{kind[:-1]}_grads"), getattr(ref, f"{kind[:-1]}_grads")
        boot, boot_ref = bootstrap_sum_variance(g, counts), bootstrap_sum_variance(g_ref, counts)
        out[f"var_{kind}"] = sum_variance(g)
        out[f"var_{kind}_lo"], out[f"var_{kind}_hi"] = interval(boot)
        out[f"ratio_{kind}"] = sum_variance(g_ref) / out[f"var_{kind}"]
        out[f"ratio_{kind}_lo"], out[f"ratio_{kind}_hi"] = interval(boot_ref / boot)
    trimmed = trimmed_sum_variance(res.param_grads)
    return VarianceRow(table, scenario, kappa, config, len(res.loss),
                       top_env_share_params=top_env_share(res.param_grads),
                       var_params_trimmed=trimmed, ratio_params_trimmed=trimmed_sum_variance(ref.param_grads) / trimmed,
                       mean_loss=float(res.loss.mean()),
                       bundles=res.bundles, triggered_fraction=res.triggered_fraction,
                       branch_substeps=res.branch_substeps, env_substeps=res.env_substeps, seconds=res.seconds, **out)


@dataclass
class StepProfile:
    """Where in the window the action-gradient variance sits: per step t, sum over joints of
    Var_e[d loss_e / d a_{e,t,j}] (T,), and the fraction of env-substeps inside a bundle (T,)."""

    scenario: str
    kappa: float
    config: str
    variance: np.ndarray
    in_bundle: np.ndarray


def step_profile(scenario: str, kappa: float, config: str, res: WindowResult) -> StepProfile:
    return StepProfile(scenario, kappa, config, res.action_grads.var(axis=0, ddof=1).sum(axis=1), res.in_bundle)
