"""Typed configuration of the differentiable simulator."""
import math
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Mapping, Tuple

from bcg.config_check import (
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    ConfigError,
    Settings,
    at_least,
    between,
    check,
    check_value,
    one_of,
    setting,
    validate_config,
)

PRECISIONS = ("float64", "float32")
"""The simulator's floating-point precisions (`precision`)."""

CONTACT_TRANSITION_WIDTH = 2.0 * math.log(9.0)
"""2 ln 9 = 4.39 [-]: the contact smoothing s_k(c) = 1 / (1 + exp(kappa c)) goes from 90 % to 10 % over a
height span of this / kappa [m] (14.6 mm at kappa 300, 4.4 mm at kappa 1000)."""

CONTACT_MODELS = ("speculative", "paper")
"""The simulator's contact laws (`SimConfig.contact_model`; a policy contract records the index in this
tuple, so its order is fixed):
- "speculative" (the default): each foot sphere's normal contact velocity gets the bias
  c / h (w - (w - beta) s_k(c)) (w `contact_speculative`, beta `contact_stabilization`): a sphere above the
  floor may approach it by its height per substep before an impulse acts, a penetration is pushed out by
  beta per substep; impulses by projected Gauss-Seidel (solvers.contact_pgs).
- "paper": the paper's law (docs/method.md, "Contact model"): no bias, the impulses act on the contact
  velocity at any height, scaled by the smoothing s_k(c); projected Jacobi iterations with the step
  `contact_relaxation` / G_kk (solvers.contact_jacobi). w and beta are not used.
bench/results/contact_models/ compares the two."""

NOT_IN_CONTRACT = ("kappa", "bundle", "precision")
"""`SimConfig` settings a policy contract's `simulator` does not record (`SimConfig.contract_settings`)."""


PRECISION_SETTING = one_of(*PRECISIONS)
"""The rule of `SimConfig.precision`."""


def check_precision(precision: str) -> None:
    """ConfigError unless `precision` is one of `PRECISIONS`."""
    check_value("precision", precision, str, PRECISION_SETTING)


@dataclass
class BundleExperiments(Settings):
    """Bundling options that are experiments, not training settings (`BundleConfig.experimental`): each
    was measured in SHAC training on dance at cpu-small against the paper's bundle (B = 10, ADD feature
    error over the last 50 of 400 iterations, docs/bundling.md) and none learned measurably better; all
    off by default. `auto_sigma` learned as the paper's bundle (kappa 300: 0.303 against 0.298; kappa
    1000: 0.353 against 0.353, three seeds; bench/results/bundling_auto_dance/); `alpha_order` hurt
    (0.54 at kappa 300, 0.54 or diverged at kappa 1000; same folder); `auto_branches` drove B to its
    maximum, 32, without learning better (0.297 against 0.298) at twice the branch rows; `branch_clip=2`
    gave 0.291 against 0.298, within seed noise (bench/results/bundling_branches_dance/);
    `nominal_forward` is the paper's ablation (the bundling study's kappa-300 ablations,
    bench/bundling_study.py). The bundler on the device has none but `nominal_forward`."""

    nominal_forward: bool = False
    """Ablation: the environment follows the unperturbed trajectory; only gradients come from the branches."""
    auto_sigma: bool = False
    """The perturbation's size follows the contact it bundles instead of `BundleConfig.sigma_p`/`sigma_v`: the
    position std is `sigma_p_widths` transition widths of the contact smoothing (its 10-90 % width
    2 ln 9 / kappa [m], so it shrinks as contact stiffens), and each event's velocity std is
    `sigma_v_per_speed` times the perturbed foot's approach speed towards the floor at that event
    (a hard landing is perturbed more than a foot already resting; `BundleConfig.perturbation_scales`)."""
    sigma_p_widths: float = setting(0.68, NON_NEGATIVE)
    """With `auto_sigma`: position std in transition widths [-] (0.68: the paper's 1 cm at kappa 300)."""
    sigma_v_per_speed: float = setting(0.025, NON_NEGATIVE)
    """With `auto_sigma`: velocity std as a fraction of the foot's approach speed at the event [-] (0.025:
    the paper's 2 cm/s at the mean approach speed measured in G1 training, 0.7-0.9 m/s on dance and jump,
    `env/approach_speed`)."""
    auto_branches: bool = False
    """B tunes itself: after each segment's backward pass the bundler measures the relative standard
    error of its bundles' mean gradient (the spread of the branches' own gradients, see
    `BundleStats.branch_rse`) and bundles opened later get the B that would bring it to
    `branch_rse_target`, within [min_branches, max_branches]; `BundleConfig.branches` is the first B."""
    branch_rse_target: float = setting(0.25, POSITIVE)
    """Relative standard error of a bundle's mean gradient that `auto_branches` aims at [-]."""
    min_branches: int = setting(2, at_least(1))
    """Smallest B `auto_branches` chooses (2 at least: one branch has no spread to measure)."""
    max_branches: int = setting(32, at_least(1))
    """Largest B `auto_branches` chooses."""
    alpha_order: bool = False
    """Mix in the zero-order estimate (Suh et al.'s alpha-order gradient; off: the paper's first-order bundle). At each
    new bundle's entry, in the backward pass, the gradient along the directions its noise moved the feet becomes
    alpha x first-order + (1 - alpha) x zero-order, alpha = v0 / (v0 + v1) from the sample variances of the two
    pooled over a segment's bundles, averaged over the segments before (`alpha_memory`; first-order only until
    measured; per bundle, from its B branches alone, alpha was noisier and the mix worse in the 1-D study:
    bundling_study.pointmass); the zero-order estimate weighs each branch's noise by its own loss (the adjoint-
    weighted deviation of its states from the bundle's mean, over the bundle's substeps). The other directions,
    and the gradient through the actions inside the bundle, stay first-order. Needs B >= 2
    (bundling.kernels.alpha_order_mix). The joint clamps (max_dq, max_dqd) are not modelled: where they cut a
    perturbation (`clamped_perturbations`) the zero-order estimate is approximate. Measured to hurt (see the
    class docstring)."""
    alpha_memory: float = setting(0.9, between(0, 1, high_open=True))
    """With `alpha_order`: weight of the running alpha when a segment's is averaged in (0: the last
    segment's alone; the ratio, not the variances, is averaged: their scale changes by orders of
    magnitude as training goes) [-]."""
    branch_clip: float = setting(0.0, NON_NEGATIVE)
    """0: off. c > 0: in the backward pass, each new bundle's branch whose entry-state adjoint is longer
    than c times the median of its bundle's is scaled down to that length, before they are summed: a
    robust mean where one branch's stiff contact would dominate the bundle's gradient (biased) [-]."""


@dataclass
class BundleConfig(Settings):
    """Bundled Contact Gradients (docs/method.md, "Bundling"); units in brackets."""

    enabled: bool = False
    """Off by default in the simulator API (the training presets turn it on)."""
    branches: int = setting(10, at_least(1))
    """B: perturbed copies of a triggered environment."""
    span_steps: int = setting(2, at_least(1))
    """H: control steps a bundle lasts (H x substeps substeps, counted from the triggering substep); with
    `end_when_released`, the most it lasts."""
    onset_fraction: float = setting(0.0, FRACTION)
    """0: the paper's trigger: a bundle opens wherever a foot sphere's force is above `threshold`, so
    also again each time one ends while a stance stays above it. f in (0, 1]: only at a contact's
    onset, where in the environment's previous substep every sphere of that leg was below f x
    threshold (f = 1: any crossing; smaller f: a stance whose force wavers around the threshold is
    one event, not several) [-]."""
    end_when_released: bool = False
    """A bundle also ends at the first substep after its opening in which no branch has a foot sphere
    above `threshold`: the branches re-run only the stiff part of the contact (the impact), not the rest
    of the H steps, and the environment goes on alone from their mean (off: the paper's fixed H)."""
    sigma_p: float = setting(0.01, NON_NEGATIVE)
    """Std of the Cartesian foot position perturbation [m] (without `experimental.auto_sigma`)."""
    sigma_v: float = setting(0.02, NON_NEGATIVE)
    """Std of the Cartesian foot velocity perturbation [m/s] (without `experimental.auto_sigma`)."""
    threshold: float = setting(400.0, POSITIVE)
    """Trigger: a foot sphere's normal contact force above this [N] (impulse / substep length)."""
    damping: float = setting(1e-4, POSITIVE)
    """lambda of the damped pseudo-inverse J^T (J J^T + lambda I)^-1 of the foot Jacobian [m^2]."""
    max_dq: float = setting(0.1, NON_NEGATIVE)
    """Clamp of each joint position perturbation [rad]."""
    max_dqd: float = setting(0.5, NON_NEGATIVE)
    """Clamp of each joint velocity perturbation [rad/s]."""
    seed: int = 0
    """Seed of the perturbation noise (a constant: no gradient flows through sampling)."""
    max_branch_rows: int = setting(0, at_least(0))
    """0: unbounded (the paper). R > 0: at most R branch rows (the B of every open bundle, summed) at
    once, so a substep runs the physics on at most R + N rows and re-runs at most R, however many
    environments touch down together (a checkpoint that holds more keeps them until those bundles end).
    An environment whose event finds too few rows free is not bundled then (its gradient in that substep
    is the plain one; `BundleStats.skipped_events`) and triggers again at its next substep above the
    threshold (with `onset_fraction`, its onset stays pending while the leg stays above it). When more
    environments trigger than fit, the ones that open a bundle are drawn uniformly (seeded by `seed`; with
    `on_device` each is admitted with probability fit / count, neighbours in environment order together).
    Must hold one bundle: >= branches, >= max_branches with `experimental.auto_branches`."""
    on_device: bool = False
    """False: the bundles are kept on the host, which decides every substep which rows to run (one copy
    to the host per substep; the paper's bundling, every option). True: kept on the device, in R / B
    fixed slots of B rows (R = `max_branch_rows`, required), every decision a kernel, so a bundled step
    launches the same kernels on the same buffers whatever lands and can be captured as a graph
    (`Simulator(..., capture_graphs=True)`; bundling.device_bundler). The same bundles, events, counters
    and gradients as on the host with the same perturbations (tested); other random draws (which
    environments get the rows, the perturbation noise). It pays for fixed shapes: the physics runs on
    R + N rows and re-runs R rows at every substep, open or not (on a GPU a launch's latency, on a CPU
    its rows, set the cost), and with gradients each substep of a window holds buffers for them. Counters
    (`BundleStats`) are read at the segment's cut. Without the experiments `auto_branches`, `alpha_order`,
    `branch_clip` or the spread measurement (`branch_rse` stays NaN)."""
    experimental: BundleExperiments = field(default_factory=BundleExperiments)
    """Options measured to give no gain (or to hurt): experiments, not training settings (`BundleExperiments`)."""

    def perturbation_scales(self, kappa: float) -> Tuple[float, float, float]:
        """(position std [m], velocity std [m/s], velocity std per approach speed [-]) of the foot
        perturbation at contact stiffness `kappa` [1/m]: the velocity std of an event is the second
        plus the third times the foot's approach speed [m/s] (bundling.kernels.foot_perturbation)."""
        x = self.experimental
        if not x.auto_sigma:
            return self.sigma_p, self.sigma_v, 0.0
        return x.sigma_p_widths * CONTACT_TRANSITION_WIDTH / kappa, 0.0, x.sigma_v_per_speed

    def check_relations(self) -> None:
        x, rows = self.experimental, self.max_branch_rows
        largest = ("experimental.max_branches", x.max_branches) if x.auto_branches else ("branches", self.branches)
        check(rows == 0 or rows >= largest[1], "max_branch_rows", rows,
              f"cannot hold one bundle ({largest[0]} {largest[1]})", f"0 (unbounded) or >= {largest[0]}")
        if self.on_device:
            check(rows > 0, "on_device", True, "max_branch_rows is 0",
                  "max_branch_rows > 0 (the fixed rows the device's slots hold)")
            for name in ("auto_branches", "alpha_order", "branch_clip"):
                check(not getattr(x, name), "on_device", True, f"experimental.{name} is set",
                      f"no experimental.{name} (bundling on the device has none; the host's bundler has)")
        if x.alpha_order:
            check(self.branches >= 2, "experimental.alpha_order", True, f"branches is {self.branches}",
                  "branches >= 2 (a spread to weigh)")
        if x.auto_branches:
            check(2 <= x.min_branches <= self.branches <= x.max_branches, "experimental.auto_branches", True,
                  f"min_branches, branches, max_branches are {x.min_branches}, {self.branches}, "
                  f"{x.max_branches}", "2 <= min_branches <= branches <= max_branches")

def upgraded_bundle(stored: Mapping[str, Any]) -> Dict[str, Any]:
    """A `BundleConfig` as a stored config holds it (a checkpoint's, a policy's sidecar), with the keys of
    `BundleExperiments` that were written before they moved into `experimental` moved there."""
    moved = {f.name for f in fields(BundleExperiments)}
    out = {k: v for k, v in stored.items() if k not in moved}
    old = {k: v for k, v in stored.items() if k in moved}
    if old:
        out["experimental"] = {**old, **stored.get("experimental", {})}
    return out


@dataclass
class SimConfig(Settings):
    """Contact and integration settings (units in brackets)."""

    kappa: float = setting(300.0, POSITIVE)
    """Contact stiffness k [1/m] of the smoothing s_k(c) = 1 / (1 + exp(k c)), c = sphere height above ground."""
    contact_speculative: float = setting(1.0, NON_NEGATIVE)
    """w: a sphere well above the ground (c >> 1/kappa) may approach it at up to w c / h before its
    impulse acts (speculative contact; 1: it just reaches the surface within the substep h). 0: the
    impulse acts on its velocity at any height, weakened only by the smoothing s_k(c) [-]."""
    contact_stabilization: float = setting(0.2, NON_NEGATIVE)
    """beta: fraction of a sphere's penetration (c << -1/kappa) pushed out per substep (Baumgarte
    stabilisation); the smoothing blends w and beta around the surface (kernels.contact) [-]."""
    contact_iterations: int = setting(10, at_least(1))
    """Projected iterations on the contact impulses per substep (Gauss-Seidel sweeps, or Jacobi iterations
    in the "paper" contact model)."""
    contact_model: str = setting(CONTACT_MODELS[0], one_of(*CONTACT_MODELS))
    """The contact law, one of `CONTACT_MODELS`: "speculative" (speculative contact with stabilisation,
    Gauss-Seidel) or "paper" (the paper's: no bias, Jacobi; kappa then sets how deep a foot sinks)."""
    contact_relaxation: float = setting(0.25, POSITIVE)
    """omega of the "paper" model's Jacobi step r_k = omega / G_kk [-] (unused by "speculative"). 1 (the
    diagonal step) diverges on the G1 standing: a foot's four spheres are strongly coupled; 0.25 (one
    over the spheres per foot) converges (solvers.contact_jacobi)."""
    substeps: int = setting(4, at_least(1))
    """Substeps per `step` call (control 50 Hz, physics 200 Hz by default)."""
    frictionloss_scale: float = setting(1.0, NON_NEGATIVE)
    """Multiplier on the model's joint friction loss (0 turns it off)."""
    frictionloss_velocity: float = setting(0.02, POSITIVE)
    """Velocity scale [rad/s] of the smooth Coulomb friction loss -F tanh(qd / v)."""
    limit_stiffness: float = setting(5.0, NON_NEGATIVE)
    """Joint-limit spring beyond the limit, in units of A_ii / h^2 (A_ii the dof's diagonal inertia) [-];
    integrated implicitly, so stable at any value (5: a joint pushed past its limit by its PD comes
    back in a few substeps, as MuJoCo's limit constraint; bench/sim_to_sim.py measured 0.2 -> 5)."""
    limit_damping: float = setting(2.0, NON_NEGATIVE)
    """Joint-limit damper beyond the limit, in units of A_ii / h [-]."""
    precision: str = setting("float64", PRECISION_SETTING)
    """Floating point of the simulation: float64, or float32 for GPUs whose float64 is slow (the
    Model's, `Model.from_mujoco(..., precision=...)`, must match; `diffsim.precision`)."""
    bundle: BundleConfig = field(default_factory=BundleConfig)
    """Bundled Contact Gradients."""

    def contract_settings(self) -> Dict[str, float]:
        """What a policy contract records of this simulator (`PolicyContract.simulator`): every
        setting but kappa (the contract's `contact_stiffness`), bundling (gradients only) and the
        precision (how the same physics was computed: a policy is evaluated in float64; the training
        run's configuration keeps it)."""
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in NOT_IN_CONTRACT}
        settings["contact_model"] = CONTACT_MODELS.index(self.contact_model)   # a contract records numbers
        return settings

    @classmethod
    def from_contract(cls, kappa: float, settings: Mapping[str, float]) -> "SimConfig":
        """The simulator a policy was trained in: `kappa` and its contract's `simulator` settings
        (defaults for what it does not record). ValueError names a setting this simulator lacks or
        a count that is not a whole number (ConfigError)."""
        known = {f.name: f.type for f in fields(cls) if f.name not in NOT_IN_CONTRACT}
        values = {}
        for name, value in settings.items():
            if name not in known:
                raise ConfigError(f"simulator: the policy records setting {name!r}, which this simulator does not "
                                  f"have (known: {', '.join(known)})")
            if name == "contact_model":     # recorded as its index in CONTACT_MODELS
                check(value in range(len(CONTACT_MODELS)), f"simulator.{name}", value, "not a contact model's index",
                      f"an index into {', '.join(CONTACT_MODELS)}")
                value = CONTACT_MODELS[int(value)]
            elif known[name] in (int, "int"):
                check(value == int(value), f"simulator.{name}", value, "not a whole number", "an integer")
                value = int(value)
            values[name] = value
        cfg = cls(kappa=kappa, **values)
        validate_config(cfg, "simulator.")
        return cfg
