"""The bundling study's report: markdown, CSV and figures, written atomically."""
import csv
import io
from dataclasses import asdict
from pathlib import Path
from typing import List, Sequence

import numpy as np

from bcg.atomic_file import write_atomic, write_text_atomic

from . import pointmass as pm
from .scenarios import HORIZON
from .statistics import TRIM, VarianceRow
from .study import StudyResults
from .window import GAMMA


def save_figure(fig, path: Path) -> None:
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, lambda f: f.write(buf.getvalue()))


def csv_bytes(results: StudyResults) -> bytes:
    """One long table: every variance row, cost row, 1-D bias/variance and across-heights row, with a
    `table` column; fields that do not apply are empty."""
    rows = [asdict(r) for r in results.main + results.ablation]
    rows += [{"table": "cost", **asdict(c)} for c in results.cost]
    rows += [{"table": "pointmass_bias_variance", **r} for r in results.pointmass["bias_variance"]]
    rows += [{"table": "pointmass_across_heights", **r} for r in results.pointmass["across"]]
    rows += [{"table": "pointmass_gradient_orders", **r} for r in results.pointmass["orders"]]
    header = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue().encode()


def ci(value: float, lo: float, hi: float) -> str:
    return f"{value:.3g} [{lo:.3g}, {hi:.3g}]"


def variance_table(rows: Sequence[VarianceRow], first: str) -> List[str]:
    lines = [f"| {first} | var params [95% CI] | var actions [95% CI] | ratio params | ratio actions | bundles | "
             "triggered | top env share | var params, trimmed (ratio) | mean loss |", "|---" * 10 + "|"]
    for r in rows:
        label = r.config if first == "config" else f"{r.scenario}, k={r.kappa:g}, {r.config}"
        lines.append(f"| {label} | {ci(r.var_params, r.var_params_lo, r.var_params_hi)} | "
                     f"{ci(r.var_actions, r.var_actions_lo, r.var_actions_hi)} | "
                     f"{ci(r.ratio_params, r.ratio_params_lo, r.ratio_params_hi)} | "
                     f"{ci(r.ratio_actions, r.ratio_actions_lo, r.ratio_actions_hi)} | {r.bundles} | "
                     f"{r.triggered_fraction:.3f} | {r.top_env_share_params:.2f} | "
                     f"{r.var_params_trimmed:.3g} ({r.ratio_params_trimmed:.3g}) | {r.mean_loss:.2f} |")
    return lines


def goal_row(results: StudyResults, scenario: str = "jump") -> VarianceRow:
    """The kappa-300 bundled row of `scenario` in the main table (the goal's measure)."""
    return next(r for r in results.main if r.scenario == scenario and r.kappa == 300.0 and r.config == "bundle")


def markdown(results: StudyResults, command: str) -> str:
    s, pmr = results.settings, results.pointmass
    goal = goal_row(results)
    out = [
        "# Bundled Contact Gradients: gradient-variance study and window cost", "",
        f"Written by `{command}` in {results.seconds / 60:.1f} min (CPU, Warp + torch float64). "
        f"{s.envs} environments per G1 run, {s.bootstrap} bootstrap resamples, seed {s.seed}. "
        "Definitions (policy, observation, reward, scenarios) are in the docstring of bench/bundling_study.py.", "",
        "Measure: sum_k Var_e[g_e,k] (unbiased, across environments) of the SHAC actor-loss gradient, "
        f"loss_e = -sum_(t<{HORIZON}) {GAMMA}^t r_e,t with a fixed zero terminal value (no critic), with respect to "
        "the policy parameters (per-env copies of a 66-64-64-29 tanh MLP, 10 333 parameters) and to the actions "
        f"({HORIZON} x 29 joint-target offsets). Brackets: 95 % bootstrap intervals over the environments; "
        "ratio = no-bundle variance over the row's (same environments, initial states and action noise; paired "
        "resamples). Bundling: B = 10, H = 2, sigma_p = 1 cm, sigma_v = 2 cm/s, threshold 400 N, mean-forward. "
        "'top env share': fraction of the parameter variance from the single most deviant environment; "
        f"'trimmed': the parameter variance without the {TRIM:.0%} of environments farthest from the median "
        "gradient (the typical environments; ratio: no-bundle trimmed over the row's trimmed).", "",
        "## Variance against kappa", ""]
    out += variance_table(results.main, "scenario, kappa, config")
    out += ["", f"**Goal (kappa 300, jump, parameters): no-bundle over bundle = {goal.ratio_params:.3g} "
            f"[{goal.ratio_params_lo:.3g}, {goal.ratio_params_hi:.3g}]; goal >= 10 (met when the interval's lower end "
            f"is): {'met' if goal.ratio_params_lo >= 10 else 'not met'}.**", ""]
    stand = [r for r in results.main if r.scenario == "stand" and r.config == "bundle"]
    out += ["Stand bundles opened per kappa (bundled runs): "
            + ", ".join(f"k={r.kappa:g}: {r.bundles} (triggered {r.triggered_fraction:.3f})" for r in stand) + ".", ""]
    out += ["Per-step action-gradient variance (sum over joints) and the fraction of env-substeps in a bundle: "
            "`variance_profile.png`; variance against kappa: `variance_vs_kappa.png`.", ""]
    for name in s.ablation_scenarios:
        out += [f"## Ablations at kappa 300, {name}", ""]
        out += variance_table([r for r in results.ablation if r.scenario == name], "config")
        out += [""]
    out += ["## 1-D point mass on the same contact model", "",
            f"Loss v_T after {pm.STEPS} control steps (dt {pm.DT} s, {pm.SUBSTEPS} substeps, {pm.ITERATIONS} projected "
            f"iterations) from height z0 falling at {-pm.V0:g} m/s; bundled estimate = mean of B raw gradients at "
            f"z0 + N(0, {pm.SIGMA * 100:g} cm^2); exact smoothed gradient by quadrature on a 9001-point grid "
            "(`pointmass_curves.png`). At z* = argmax |smoothed gradient|, over "
            f"{s.pointmass_repeats} repeats (`pointmass_bias_variance.png`):", "",
            "| kappa | B | z* [m] | raw grad | smoothed grad | bias of the mean [+- s.e.] | variance | B x variance |",
            "|---" * 8 + "|"]
    for r in pmr["bias_variance"]:
        out.append(f"| {r['kappa']:g} | {r['B']} | {r['z_star']:.4f} | {r['raw_grad']:.4g} | "
                   f"{r['smoothed_grad']:.4g} | "
                   f"{r['bias']:.3g} +- {r['bias_stderr']:.2g} | {r['variance']:.4g} | {r['B_times_variance']:.4g} |")
    check = max(float(np.nanmax(np.abs(c.smoothed - c.smoothed_from_f))) for c in pmr["curves"])
    out += ["", f"Check: E[f'(z + w)] against d/dz E[f(z + w)] on the grid: max difference {check:.2g} 1/s.", "",
            "Across 'environments' z0 ~ U(0.3, 0.5) m (the G1 measure in 1-D), B = 10:", "",
            "| kappa | envs | var raw | var bundled | var of exact smoothed (floor) | ratio | ratio as B -> inf |",
            "|---" * 7 + "|"]
    for r in pmr["across"]:
        out.append(f"| {r['kappa']:g} | {r['envs']} | {r['var_raw']:.4g} | {r['var_bundled']:.4g} | "
                   f"{r['var_smoothed']:.4g} | {r['ratio']:.3g} | {r['ratio_limit']:.3g} |")
    out += ["", "First-order (the bundle's), zero-order and alpha-order (Suh et al.) estimates of the smoothed "
            "gradient from the same B = 10 samples (`pointmass.gradient_orders`): at z* over "
            f"{s.pointmass_repeats} repeats, and their mean squared error against the smoothed gradient across "
            f"{s.pointmass_envs} heights z0 ~ U(0.3, 0.5) m:", "",
            "| kappa | estimator | bias at z* [+- s.e.] | variance at z* | MSE across heights | median alpha |",
            "|---" * 6 + "|"]
    for r in pmr["orders"]:
        out.append(f"| {r['kappa']:g} | {r['estimator']} | {r['bias']:.3g} +- {r['bias_stderr']:.2g} | "
                   f"{r['variance']:.4g} | {r['mse_across']:.4g} | {r['median_alpha']:.2f} |")
    out += ["", "## Cost of a 32-step SHAC window (kappa 300, B = 10)", "",
            "'impact only': bundles open where a leg's force rises above the threshold from below a quarter of "
            "it and end once no branch's is above it (`onset_fraction` 0.25, `end_when_released`).", "",
            "Taped forward through the torch bridge + backward, same policy and scenario, runs interleaved after a "
            "warm-up; median wall-clock.", "",
            "'row floor' = 1 + branch substeps / env substeps, the ratio if the cost were proportional to the rows "
            "simulated.", "",
            "| scenario | bundling | envs | repeats | plain [s] | bundled [s] | ratio (goal <= 1.5) | row floor | "
            "triggered | bundles | branch substeps | env substeps |", "|---" * 12 + "|"]
    for c in results.cost:
        out.append(f"| {c.scenario} | {c.bundling} | {c.envs} | {c.repeats} | {c.plain_median_s:.3f} | "
                   f"{c.bundle_median_s:.3f} | "
                   f"{c.ratio:.2f} | {c.row_floor:.2f} | {c.triggered_fraction:.3f} | {c.bundles} | "
                   f"{c.branch_substeps} | {c.env_substeps} |")
    return "\n".join(out) + "\n"


def plot_variance(results: StudyResults, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r.scenario for r in results.main))
    fig, axes = plt.subplots(2, len(names), figsize=(4.2 * len(names), 7), squeeze=False, constrained_layout=True)
    for j, name in enumerate(names):
        for i, kind in enumerate(("params", "actions")):
            ax = axes[i, j]
            for config, marker in (("no bundle", "o"), ("bundle", "s")):
                rows = [r for r in results.main if r.scenario == name and r.config == config]
                k = np.array([r.kappa for r in rows]) * (1.04 if config == "bundle" else 1.0)
                v = np.array([getattr(r, f"var_{kind}") for r in rows])
                err = np.array([[v_ - getattr(r, f"var_{kind}_lo"), getattr(r, f"var_{kind}_hi") - v_]
                                for r, v_ in zip(rows, v)]).T
                ax.errorbar(k, v, yerr=err, marker=marker, capsize=3, label=config)
            ax.set(xscale="log", yscale="log", xlabel="kappa [1/m]", title=f"{name}: w.r.t. {kind}",
                   ylabel="sum_k Var_e[g_k]")
            ax.legend()
    save_figure(fig, path)


def plot_profiles(results: StudyResults, path: Path) -> None:
    import matplotlib.pyplot as plt
    keys = sorted({(p.scenario, p.kappa) for p in results.profiles if p.kappa == 300.0})
    fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 3.8), squeeze=False, constrained_layout=True)
    for ax, (name, kappa) in zip(axes[0], keys):
        twin = ax.twinx()
        for p in results.profiles:
            if (p.scenario, p.kappa) == (name, kappa):
                ax.plot(p.variance, label=p.config)
                if p.config == "bundle":
                    twin.fill_between(np.arange(HORIZON), p.in_bundle, color="grey", alpha=0.25, step="mid")
        twin.set(ylim=(0, 1), ylabel="fraction in a bundle (grey)")
        ax.set(yscale="log", xlabel="control step t", ylabel="sum_j Var_e[dL/da_t,j]", title=f"{name}, kappa {kappa:g}")
        ax.legend()
    save_figure(fig, path)


def plot_ablations(results: StudyResults, path: Path) -> None:
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r.scenario for r in results.ablation))
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        rows = [r for r in results.ablation if r.scenario == name]
        x = np.arange(len(rows))
        for off, kind in ((-0.2, "params"), (0.2, "actions")):
            v = np.array([getattr(r, f"ratio_{kind}") for r in rows])
            err = np.array([[v_ - getattr(r, f"ratio_{kind}_lo"), getattr(r, f"ratio_{kind}_hi") - v_]
                            for r, v_ in zip(rows, v)]).T
            ax.bar(x + off, v, 0.4, yerr=err, capsize=3, label=kind)
        ax.axhline(10.0, color="k", ls="--", lw=0.8)
        ax.set(yscale="log", xticks=x, ylabel="no-bundle var / var", title=f"ablations, {name}, kappa 300")
        ax.set_xticklabels([r.config for r in rows], rotation=45, ha="right")
        ax.legend()
    save_figure(fig, path)


def plot_pointmass(results: StudyResults, curves_path: Path, bv_path: Path) -> None:
    import matplotlib.pyplot as plt
    curves = results.pointmass["curves"]
    fig, axes = plt.subplots(2, len(curves), figsize=(4.5 * len(curves), 6.5), squeeze=False)
    for j, c in enumerate(curves):
        axes[0, j].plot(c.z0, c.f)
        axes[0, j].set(title=f"kappa {c.kappa:g}", xlabel="z0 [m]", ylabel="f = v_T [m/s]")
        z_star = c.z0[np.nanargmax(np.abs(c.smoothed))]
        axes[1, j].plot(c.z0, c.raw, lw=0.8, label="raw df/dz0")
        axes[1, j].plot(c.z0, c.smoothed, lw=1.6, label=f"smoothed (sigma {pm.SIGMA * 100:g} cm)")
        axes[1, j].set(xlabel="z0 [m]", ylabel="gradient [1/s]", xlim=(z_star - 0.1, z_star + 0.1),
                       title="gradient (zoomed on the landing)")
        axes[1, j].legend()
    save_figure(fig, curves_path)
    rows = results.pointmass["bias_variance"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for kappa in dict.fromkeys(r["kappa"] for r in rows):
        sel = [r for r in rows if r["kappa"] == kappa]
        b = np.array([r["B"] for r in sel])
        axes[0].errorbar(b, [abs(r["bias"]) for r in sel], yerr=[2 * r["bias_stderr"] for r in sel], marker="o",
                         capsize=3, label=f"kappa {kappa:g}")
        axes[1].plot(b, [r["variance"] for r in sel], marker="o", label=f"kappa {kappa:g}")
        axes[1].plot(b, sel[0]["variance"] / b, "k:", lw=0.8)
    axes[0].set(xscale="log", yscale="symlog", xlabel="B", ylabel="|mean estimate - smoothed| (+- 2 s.e.)",
                title="bias against the dense smoothed gradient")
    axes[1].set(xscale="log", yscale="log", xlabel="B", ylabel="variance of the estimate",
                title="variance (dotted: 1/B)")
    for ax in axes:
        ax.legend()
    save_figure(fig, bv_path)


def write_outputs(results: StudyResults, out: Path, command: str) -> None:
    write_text_atomic(out / "study.md", markdown(results, command))
    write_atomic(out / "study.csv", lambda f: f.write(csv_bytes(results)))
    plot_variance(results, out / "variance_vs_kappa.png")
    plot_profiles(results, out / "variance_profile.png")
    plot_ablations(results, out / "ablations.png")
    plot_pointmass(results, out / "pointmass_curves.png", out / "pointmass_bias_variance.png")
