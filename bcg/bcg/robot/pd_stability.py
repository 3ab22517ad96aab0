"""Whether PD gains are stable under the control path they will meet, from the robot model.

The control path (`PdPath`): a PD law evaluated explicitly once per step of `step_s`, its torque
held over the step, from sensors `delay_steps` steps old. Unitree's MuJoCo simulator
(simulate_python) evaluates it once per physics step (SIMULATE_DT, 5 ms by default) from the sensors
of the step before (delay 1); this suite's bridge inside every 1 ms step from the current state
(delay 0); the robot's motor drivers run theirs much faster than either.

For one joint of inertia I (kg m^2: reflected link inertia plus rotor armature, `RobotDescription.
joint_inertia`) under torque kp (q* - q) - kd dq integrated semi-implicitly (MuJoCo's Euler), the
tracking error obeys a recurrence with characteristic polynomial

    (z - 1)^2 z^d + beta (z - 1) + alpha z,     alpha = kp dt^2 / I,   beta = kd dt / I,

d the delay in steps (with kp = 0, pure damping: (z - 1) z^d + beta, the free position aside). The
gains are stable when every root lies inside the unit circle: without delay beta < 2 and
alpha + 2 beta < 4; one step of delay shrinks that to about alpha < 0.25 and beta < 1. "Well inside"
is `GAIN_MARGIN`: the gains times GAIN_MARGIN would still be stable (`gain_margin`). The same
helpers size the built-in stand policy's damping (`best_kd`), cap the node's damping gain
(`max_stable_kd`) and check a policy's gains at the node's start.
"""
from dataclasses import dataclass

import numpy as np

GAIN_MARGIN = 1.5
"""Gains count as stable when 1.5 times them would still be: room for an inertia 1.5 times smaller
than the model's, or a step 1.2 times longer."""
_SCALES = np.unique(np.concatenate([np.geomspace(0.05, 20.0, 150), [1.0]]))
"""Gain scales `gain_margin` tries (4 % apart)."""
_BETAS = np.linspace(0.005, 2.0, 400)
"""Normalised damping values `best_kd` tries."""


@dataclass(frozen=True)
class PdPath:
    """The control path PD gains meet: explicit PD every `step_s` from sensors `delay_steps` steps old."""

    step_s: float
    """s between two evaluations of the PD law (the torque is held in between)."""
    delay_steps: int = 0
    """How many steps old the sensors it reads are."""

    def __post_init__(self):
        if not self.step_s > 0 or self.delay_steps < 0:
            raise ValueError(f"PD path: step {self.step_s!r} s must be > 0 and delay {self.delay_steps!r} >= 0")

    def __str__(self) -> str:
        return f"explicit PD every {self.step_s * 1e3:g} ms from sensors {self.delay_steps} step(s) old"


def _companion_radius(coefficients: np.ndarray) -> np.ndarray:
    """Largest root magnitude of monic polynomials, coefficients (..., degree + 1), highest first."""
    degree = coefficients.shape[-1] - 1
    companion = np.zeros(coefficients.shape[:-1] + (degree, degree))
    companion[..., 0, :] = -coefficients[..., 1:]
    companion[..., np.arange(1, degree), np.arange(degree - 1)] = 1.0
    return np.abs(np.linalg.eigvals(companion)).max(axis=-1)


def spectral_radius(alpha, beta, delay_steps: int) -> np.ndarray:
    """Largest root magnitude of the error recurrence (module docstring); < 1: stable. `alpha`,
    `beta` broadcast together; alpha == 0 (pure damping) leaves the free position out."""
    alpha, beta = np.broadcast_arrays(np.asarray(alpha, float), np.asarray(beta, float))
    d = int(delay_steps)
    full = np.zeros(alpha.shape + (d + 3,))
    full[..., 0], full[..., 1], full[..., 2] = 1.0, -2.0, 1.0
    full[..., d + 1] += alpha + beta
    full[..., d + 2] -= beta
    damping = np.zeros(alpha.shape + (d + 2,))
    damping[..., 0], damping[..., 1] = 1.0, -1.0
    damping[..., d + 1] += beta
    return np.where(alpha > 0, _companion_radius(full), _companion_radius(damping))


def _normalised(kp, kd, inertia, path: PdPath):
    inertia = np.asarray(inertia, float)
    return np.asarray(kp, float) * path.step_s ** 2 / inertia, np.asarray(kd, float) * path.step_s / inertia


def gain_margin(kp, kd, inertia, path: PdPath) -> np.ndarray:
    """Per joint, the factor by which the gains (kp, kd) could grow and stay stable on `path`
    (< 1: unstable as they are; 0: unstable at any scale tried), within 4 %."""
    alpha, beta = _normalised(kp, kd, inertia, path)
    stable = spectral_radius(alpha[..., None] * _SCALES, beta[..., None] * _SCALES, path.delay_steps) < 1.0
    one = int(np.searchsorted(_SCALES, 1.0))
    margins = np.zeros(alpha.shape)
    for j in np.ndindex(alpha.shape):
        row = stable[j]
        if row[one]:
            unstable_above = np.flatnonzero(~row[one:])
            last = one + (unstable_above[0] - 1 if unstable_above.size else row.size - 1 - one)
        else:
            below = np.flatnonzero(row[:one])
            last = below[-1] if below.size else -1
        margins[j] = _SCALES[last] if last >= 0 else 0.0
    return margins


def max_stable_kd(inertia, path: PdPath, margin: float = GAIN_MARGIN) -> np.ndarray:
    """Per joint, the largest damping gain (kp = 0) that stays stable on `path` with `margin`, N m s/rad."""
    lo, hi = 0.0, 4.0                 # beta bounds: the damping loop is stable for small beta, not at 4
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if spectral_radius(0.0, mid, path.delay_steps) < 1.0 else (lo, mid)
    return lo / margin * np.asarray(inertia, float) / path.step_s


def best_kd(kp, inertia, path: PdPath) -> np.ndarray:
    """Per joint, the damping gain that makes the error decay fastest on `path` for stiffness `kp`
    (smallest spectral radius), N m s/rad."""
    alpha, _ = _normalised(kp, 0.0, inertia, path)
    radius = spectral_radius(alpha[..., None], _BETAS, path.delay_steps)
    return _BETAS[np.argmin(radius, axis=-1)] * np.asarray(inertia, float) / path.step_s
