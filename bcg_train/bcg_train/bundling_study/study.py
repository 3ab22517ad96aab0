"""The bundling study's runs: variance with and without bundling against kappa, ablations, the 1-D
case and the cost of a bundled window."""
import time
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from bcg_train.diffsim import BundleConfig

from . import pointmass as pm
from .scenarios import (
    ABLATIONS,
    DEFAULT_BUNDLE,
    IMPACT_ONLY_BUNDLE,
    KAPPAS,
    Scenario,
    ScenarioFactory,
    scenario_factories,
    study_config,
)
from .statistics import StepProfile, VarianceRow, resample_counts, step_profile, variance_row
from .window import StudyWindow


def compare(table: str, kappa: float, make_scenario: ScenarioFactory, configs: Sequence[Tuple[str, BundleConfig]],
            counts: np.ndarray, log: Callable[[str], None]) -> Tuple[List[VarianceRow], List[StepProfile]]:
    """No bundling and each bundled configuration on the same scenario (same envs, states, noise)."""
    plain = study_config(kappa, None)
    scenario = make_scenario(plain)
    ref = StudyWindow(plain, scenario).run()
    ref.check_finite(f"{scenario.name} kappa {kappa:g} no bundle")
    rows = [variance_row(table, scenario.name, kappa, "no bundle", ref, ref, counts)]
    profiles = [step_profile(scenario.name, kappa, "no bundle", ref)]
    for name, cfg in configs:
        res = StudyWindow(study_config(kappa, cfg), scenario).run()
        res.check_finite(f"{scenario.name} kappa {kappa:g} {name}")
        rows.append(variance_row(table, scenario.name, kappa, name, res, ref, counts))
        profiles.append(step_profile(scenario.name, kappa, name, res))
    for r in rows:
        log(f"  {r.table:8s} {r.scenario:10s} kappa {r.kappa:6g} {r.config:16s} var_params {r.var_params:10.4g} "
            f"var_actions {r.var_actions:10.4g} ratio {r.ratio_params:7.3g} bundles {r.bundles:4d} "
            f"triggered {r.triggered_fraction:.3f} ({r.seconds:.1f} s)")
    return rows, profiles


@dataclass
class CostRow:
    """Median wall-clock [s] of the taped 32-step window plus its backward, with and without bundling."""

    scenario: str
    bundling: str           # "B = 10" (DEFAULT_BUNDLE) or "impact only" (IMPACT_ONLY_BUNDLE)
    kappa: float
    envs: int
    repeats: int
    plain_median_s: float
    bundle_median_s: float
    ratio: float
    row_floor: float        # 1 + branch_substeps / env_substeps: the ratio if cost were proportional to rows
    triggered_fraction: float
    bundles: int
    branch_substeps: int
    env_substeps: int


def window_cost(scenario: Scenario, kappa: float, repeats: int, label: str, bundle: BundleConfig) -> CostRow:
    """Bundling (`bundle`, called `label`) against none, runs interleaved after one warm-up of each;
    counters of the last bundled run."""
    plain = StudyWindow(study_config(kappa, None), scenario)
    bundled = StudyWindow(study_config(kappa, bundle), scenario)
    plain.run(), bundled.run()
    times = {"plain": [], "bundle": []}
    for _ in range(repeats):
        times["plain"].append(plain.run().seconds)
        last = bundled.run()
        times["bundle"].append(last.seconds)
    p, b = float(np.median(times["plain"])), float(np.median(times["bundle"]))
    floor = 1 + last.branch_substeps / last.env_substeps
    return CostRow(scenario.name, label, kappa, scenario.envs, repeats, p, b, b / p, floor, last.triggered_fraction,
                   last.bundles, last.branch_substeps, last.env_substeps)


@dataclass
class StudySettings:
    envs: int
    kappas: Sequence[float]
    bootstrap: int
    ablation_scenarios: Sequence[str]
    cost_envs: int
    cost_repeats: int
    pointmass_repeats: int
    pointmass_envs: int
    seed: int = 0


FULL = StudySettings(envs=128, kappas=KAPPAS, bootstrap=2000, ablation_scenarios=("jump", "jump_tight"), cost_envs=64,
                     cost_repeats=5, pointmass_repeats=2000, pointmass_envs=4000)


QUICK = StudySettings(envs=24, kappas=(50.0, 300.0), bootstrap=300, ablation_scenarios=("jump",), cost_envs=64,
                      cost_repeats=3, pointmass_repeats=300, pointmass_envs=1000)


@dataclass
class StudyResults:
    settings: StudySettings
    main: List[VarianceRow]
    ablation: List[VarianceRow]
    profiles: List[StepProfile]
    pointmass: Dict
    cost: List[CostRow]
    seconds: float


def run_study(settings: StudySettings, log: Callable[[str], None] = print) -> StudyResults:
    """Variance rows (main and ablations), per-step profiles, the 1-D case and the window cost."""
    start = time.perf_counter()
    rng = np.random.default_rng(settings.seed)
    counts = resample_counts(settings.envs, settings.bootstrap, rng)
    factories = scenario_factories(settings.envs, settings.seed)
    main, ablation, profiles = [], [], []
    log("variance against kappa")
    for make in factories.values():
        for kappa in settings.kappas:
            rows, prof = compare("main", kappa, make, [("bundle", DEFAULT_BUNDLE)], counts, log)
            main += rows
            profiles += prof
    log("ablations at kappa 300")
    configs = [(label, replace(DEFAULT_BUNDLE, **change)) for label, change in ABLATIONS]
    for name in settings.ablation_scenarios:
        ablation += compare("ablation", 300.0, factories[name], configs, counts, log)[0]
    log("1-D point mass")
    pointmass = run_pointmass(settings, rng)
    log("window cost at kappa 300")
    cost_factories = scenario_factories(settings.cost_envs, settings.seed)
    plain = study_config(300.0, None)
    cost = [window_cost(cost_factories[name](plain), 300.0, settings.cost_repeats, label, bundle)
            for name in ("jump", "stand") for label, bundle in (("B = 10", DEFAULT_BUNDLE),
                                                                 ("impact only", IMPACT_ONLY_BUNDLE))]
    for c in cost:
        log(f"  {c.scenario}, {c.bundling}: plain {c.plain_median_s:.2f} s, bundle {c.bundle_median_s:.2f} s, "
            f"ratio {c.ratio:.2f}, triggered {c.triggered_fraction:.3f}, branch substeps {c.branch_substeps}")
    return StudyResults(settings, main, ablation, profiles, pointmass, cost, time.perf_counter() - start)


def run_pointmass(settings: StudySettings, rng: np.random.Generator) -> Dict:
    """Dense curves, bias / variance against B, the across-heights variance and the first-, zero- and
    alpha-order estimators compared, for kappa 50, 300, 1000."""
    curves = [pm.dense_curves(k) for k in (50.0, 300.0, 1000.0)]
    rows = [r for c in curves for r in pm.bias_variance_rows(c, settings.pointmass_repeats, rng)]
    across = [pm.across_heights_variance(c, settings.pointmass_envs, rng) for c in curves]
    orders = [r for c in curves for r in pm.order_rows(c, settings.pointmass_repeats, settings.pointmass_envs, rng)]
    return {"curves": curves, "bias_variance": rows, "across": across, "orders": orders}
