"""Does bundling help SHAC learn? The ablation: the same motion, seed, sizes and
environment-step budget for every configuration, trained by the suite's own runner.

Configurations: SHAC at kappa 300 with and without bundling (the paper's, bundling of the impact
only: `bundle.onset_fraction` 0.25, `bundle.end_when_released`, and perturbation sizes that follow the
contact: `bundle.experimental.auto_sigma`, and the zero-order estimate mixed in:
`bundle.experimental.alpha_order`), at kappa 50
without (soft contact), at kappa 1000 with (the paper's, auto_sigma, alpha_order) and without, and PPO
(kappa 300, no gradients through the simulator). SHAC without bundling keeps the same number of
environments as with it (the paper doubles them; here equal environment steps per iteration keep the
curves comparable). Per run: the learning curves (ADD
feature error `add/delta_abs_mean`, i.e. the mean |phi_ref - phi_sim|, and the episode length)
against environment steps (branch steps reported separately) and wall-clock, the actor-gradient
statistics SHAC logs (`grad_norm/actor`, `grad/*` where the runner has them), and, for the exported
policy, MuJoCo falls and tracking error (`bcg-eval`'s evaluation). The final ADD feature error is
the mean over the last 10 % of iterations.

    python bench/bundling_ablation.py [--quick] [--motion jump] [--seeds 1] [--out out/bundling_ablation]

--quick: the cpu-smoke sizes (8 environments, horizon 16), 40 SHAC iterations (PPO at the same
environment steps), 1 seed, 3 s evaluations: 6 min on 2 cores beside two training runs (2026-12-06,
eleven arms; `bench/results/bundling_ablation_quick/`). Full: cpu-small sizes, 300 iterations, 5 s x
3 seeds of evaluation per policy; hours per seed.
Writes OUT/ablation.md, OUT/ablation.csv, OUT/curves_*.png and one run folder per configuration.
Last line: learning_gain_k300=<final ADD feature error without bundling / with bundling, kappa 300>
learning_gain_k1000=<same at kappa 1000> learning_gain_k300_impact_only=<same, kappa 300, impact only>
learning_gain_k300_auto_sigma=<same, auto_sigma> learning_gain_k1000_auto_sigma=<same, kappa 1000>
learning_gain_k300_alpha_order=<same, alpha_order> learning_gain_k1000_alpha_order=<same, kappa 1000>.
"""
import argparse
import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from bcg.atomic_file import write_text_atomic
from bcg_train.bundling_study.scenarios import IMPACT_ONLY
from bcg_train.cli import build_env
from bcg_train.curves import plot_runs, read_metrics
from bcg_train.evaluation.cli import evaluate
from bcg_train.export import export_checkpoint
from bcg_train.runner import Runner, make_algorithm
from bcg_train.train_config import TrainConfig, apply_overrides, load_preset


@dataclass(frozen=True)
class Arm:
    """One configuration of the ablation."""

    name: str
    algorithm: str
    kappa: float
    bundling: str
    """A key of BUNDLINGS."""


BUNDLINGS = {"none": None, "paper": {}, "impact only": IMPACT_ONLY,
             "auto sigma": {"experimental": {"auto_sigma": True}},
             "alpha order": {"experimental": {"alpha_order": True}}}
"""Bundling of an arm -> its `env.sim.bundle` settings over the preset's (None: bundling off): the
preset's (the paper's), the impact only, perturbation sizes that follow the contact (`experimental.auto_sigma`),
or the zero-order estimate mixed in (`experimental.alpha_order`)."""

ARMS = (Arm("shac_k300_bundle", "shac", 300.0, "paper"), Arm("shac_k300_plain", "shac", 300.0, "none"),
        Arm("shac_k300_impact", "shac", 300.0, "impact only"), Arm("shac_k300_auto_sigma", "shac", 300.0, "auto sigma"),
        Arm("shac_k50_plain", "shac", 50.0, "none"), Arm("shac_k1000_bundle", "shac", 1000.0, "paper"),
        Arm("shac_k1000_auto_sigma", "shac", 1000.0, "auto sigma"), Arm("shac_k300_alpha_order", "shac", 300.0,
                                                                         "alpha order"),
        Arm("shac_k1000_alpha_order", "shac", 1000.0, "alpha order"),
        Arm("shac_k1000_plain", "shac", 1000.0, "none"), Arm("ppo_k300", "ppo", 300.0, "none"))


@dataclass(frozen=True)
class Budget:
    preset: str
    shac_iterations: int
    eval_seconds: float
    eval_seeds: int


QUICK = Budget("cpu-smoke", 40, 3.0, 1)
FULL = Budget("cpu-small", 300, 5.0, 3)


STATISTICS = ("grad_norm/actor", "grad/actor_clipped_fraction", "grad/actor_cosine", "grad/actor_window_variance",
              "env/triggered_fraction", "env/branch_rse", "env/branch_top_share", "env/approach_speed",
              "env/alpha")
"""The runs' logged gradient statistics reported per arm (final means; absent ones left out)."""


def arm_config(arm: Arm, budget: Budget, seed: int) -> TrainConfig:
    """The preset with this arm's algorithm, contact stiffness and bundling, at the SHAC arms'
    environment-step budget (PPO's iterations chosen to match it)."""
    base = load_preset(budget.preset)
    steps = base.shac.num_envs * base.shac.horizon * budget.shac_iterations
    ppo_iterations = max(1, round(steps / (base.ppo.num_envs * base.ppo.steps_per_env)))
    cfg = apply_overrides(base, {
        "algorithm": arm.algorithm,
        "shac": {"iterations": budget.shac_iterations, "num_envs_without_bundle": base.shac.num_envs},
        "ppo": {"iterations": ppo_iterations},
        "runner": {"seed": seed, "checkpoint_every": budget.shac_iterations, "curves_every": 10 ** 6},
        "env": {"sim": {"kappa": arm.kappa, "bundle": {"enabled": BUNDLINGS[arm.bundling] is not None,
                                                       **(BUNDLINGS[arm.bundling] or {})}}}})
    cfg.validate()
    return cfg


def final_mean(values: np.ndarray) -> float:
    """Mean over the last 10 % of the finite values."""
    finite = values[np.isfinite(values)]
    return float(finite[-max(1, len(finite) // 10):].mean()) if len(finite) else float("nan")


def run_arm(arm: Arm, budget: Budget, motion: str, seed: int, out: Path, log) -> Dict:
    """Train, export and evaluate one arm; its row of the table."""
    run_dir = out / f"{arm.name}_seed{seed}"
    cfg = arm_config(arm, budget, seed)
    log(f"{arm.name} seed {seed}: {cfg.algorithm}, kappa {arm.kappa:g}, bundling {arm.bundling} -> {run_dir}")
    last = Runner(make_algorithm(build_env(cfg, motion, "cpu"), cfg), cfg, run_dir, {"motion": motion}).train()
    policy, _ = export_checkpoint(last, run_dir / "policy.onnx")
    result = evaluate(policy, motion, budget.eval_seeds, budget.eval_seconds)
    m = read_metrics(run_dir)
    s = result["summary"]
    row = {"arm": arm.name, "seed": seed, "algorithm": arm.algorithm, "kappa": arm.kappa, "bundling": arm.bundling,
           "env_steps": float(m["env_steps"][-1]), "wall_clock_s": float(m["wall_clock_s"][-1]),
           "branch_substeps": float(m["env/branch_substeps"][-1]) if "env/branch_substeps" in m else 0.0,
           "final_add_error": final_mean(m["add/delta_abs_mean"]),
           "final_episode_length": final_mean(m["episode/length"]),
           "falls_mujoco": s["falls_mujoco"], "eval_seeds": s["seeds"],
           "tracking_mujoco_cm": s["tracking_error_mujoco_cm"]}
    for key in STATISTICS:
        if key in m:
            row[key] = final_mean(m[key])
    return row


def gain(rows: Sequence[Dict], kappa: float, bundling: str = "paper") -> float:
    """Final ADD feature error of SHAC without bundling over with `bundling`, at `kappa`, averaged over
    seeds (nan where an arm is missing)."""
    def mean_error(kind: str) -> float:
        errors = [r["final_add_error"] for r in rows
                  if r["algorithm"] == "shac" and r["kappa"] == kappa and r["bundling"] == kind]
        return float(np.mean(errors)) if errors else float("nan")
    return mean_error("none") / mean_error(bundling)


def gains(rows: Sequence[Dict]) -> Dict[str, float]:
    """"k300", "k1000" (the paper's bundling), then the other bundlings at 300 and 1000 -> `gain`."""
    return {"k300": gain(rows, 300.0), "k1000": gain(rows, 1000.0),
            "k300 impact only": gain(rows, 300.0, "impact only"), "k300 auto sigma": gain(rows, 300.0, "auto sigma"),
            "k1000 auto sigma": gain(rows, 1000.0, "auto sigma"), "k300 alpha order": gain(rows, 300.0, "alpha order"),
            "k1000 alpha order": gain(rows, 1000.0, "alpha order")}


def markdown(rows: Sequence[Dict], command: str) -> str:
    keys = [k for k in STATISTICS if any(k in r for r in rows)]
    lines = ["# Bundling ablation", "", f"`{command}`", "",
             "Equal environment-step budget per arm; final = mean over the last 10 % of iterations; MuJoCo "
             "evaluation of the exported policy (bcg-eval's rollout).", "",
             "| arm | seed | env steps | branch substeps | wall-clock [s] | final ADD error | final episode length | "
             "falls in MuJoCo | tracking MuJoCo [cm] | " + " | ".join(keys) + " |",
             "|---" * (9 + len(keys)) + "|"]
    for r in rows:
        lines.append(f"| {r['arm']} | {r['seed']} | {r['env_steps']:.0f} | {r['branch_substeps']:.0f} | "
                     f"{r['wall_clock_s']:.0f} | {r['final_add_error']:.4f} | {r['final_episode_length']:.1f} | "
                     f"{r['falls_mujoco']}/{r['eval_seeds']} | {r['tracking_mujoco_cm']:.1f} | "
                     + " | ".join(f"{r.get(k, float('nan')):.3g}" for k in keys) + " |")
    lines += ["", "Learning gain (final ADD error without bundling / with, > 1: bundling learned better): "
              + ", ".join(f"{label} {value:.3g}" for label, value in gains(rows).items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke sizes, 40 iterations, 1 seed (about 6 min)")
    p.add_argument("--motion", default="jump",
                   help="reference motion (default: the real jump segment, whose landings are the stiff events; "
                        "synthetic_jump needs no data)")
    p.add_argument("--seeds", type=int, help="training seeds per arm (default: 1 quick, 3 full)")
    p.add_argument("--out", type=Path, default=Path("out/bundling_ablation"))
    args = p.parse_args(argv)
    budget = QUICK if args.quick else FULL
    seeds = args.seeds or (1 if args.quick else 3)

    def log(line: str) -> None:
        print(f"bundling_ablation: {line}", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: List[Dict] = [run_arm(arm, budget, args.motion, seed, args.out, log) for seed in range(seeds) for arm in ARMS]
    command = "python bench/bundling_ablation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(rows, command)
    write_text_atomic(args.out / "ablation.md", text)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(args.out / "ablation.csv", buf.getvalue())
    runs = {f"{r['arm']} s{r['seed']}": read_metrics(args.out / f"{r['arm']}_seed{r['seed']}") for r in rows}
    plot_runs(runs, args.out, metrics=("add/delta_abs_mean", "episode/length", "reward/add", "grad_norm/actor"))
    print(text)
    print(" ".join(f"learning_gain_{label.replace(' ', '_')}={value:.3g}" for label, value in gains(rows).items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
