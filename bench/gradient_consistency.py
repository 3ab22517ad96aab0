"""How consistent are SHAC's actor gradients at a trained checkpoint, with and without bundling?

The quantity that decides whether a first-order update helps is whether independent windows agree
on the direction. For a SHAC checkpoint this script rolls K independent windows (fresh reference
state initialisations of N environments each, the checkpoint's networks and ADD discriminator, the
trainer's own `Shac.rollout`) under each variant of the checkpoint's config, takes each window's
actor gradient (the full parameter vector), and reports:
- the mean pairwise cosine between the K gradients (with its standard error over the K (K-1) / 2
  pairs): 1 = every window points the same way, 0 = noise;
- the signal fraction |mean g| / mean |g| (1 for identical gradients, about 1/sqrt(K) for noise);
- the mean and largest gradient norm (heavy tails show up as max >> mean).

Variants are config overrides on the checkpoint's config (`--variant NAME:KEY=VALUE,KEY=VALUE`, as
`bcg-train --set` takes them); the defaults compare the config as trained with bundling off, domain
randomisation off, and horizons 16 and 8. Every variant uses the same N and the same env seed, so
each starts from the same reference phases.

    python bench/gradient_consistency.py RUN_OR_CHECKPOINT [--windows 8] [--envs N] [--variant ...]
        [--out out/gradient_consistency]

Writes OUT/gradient_consistency.md and .json. Last line:
`grad_cosine_bundle=<mean pairwise cosine as trained> grad_cosine_plain=<with bundling off>`.
"""
import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch

from bcg.atomic_file import write_text_atomic
from bcg.config_check import dotted_leaves
from bcg_train.bundling_study.statistics import direction_consistency
from bcg_train.checkpoint import find_checkpoint, load_checkpoint
from bcg_train.cli import parse_assignments
from bcg_train.imitation.env import G1ImitationEnv
from bcg_train.runner import make_algorithm
from bcg_train.train_config import ConfigError, TrainConfig, apply_overrides, config_from_dict

DEFAULT_VARIANTS = ("as_trained:", "plain:env.sim.bundle.enabled=false",
                    "no_randomization:env.randomization.enabled=false", "horizon_16:shac.horizon=16",
                    "horizon_8:shac.horizon=8")


def parse_variant(text: str) -> Tuple[str, Dict]:
    """'NAME:KEY=VALUE,KEY=VALUE' -> (NAME, nested overrides); 'NAME:' is the config as trained."""
    name, sep, rest = text.partition(":")
    if not sep or not name:
        raise ValueError(f"--variant {text!r}: expected NAME:KEY=VALUE[,KEY=VALUE...] or NAME:")
    return name, parse_assignments([item for item in rest.split(",") if item])


def window_gradients(cfg: TrainConfig, state: dict, motion: str, num_envs: int, windows: int,
                     seed: int) -> torch.Tensor:
    """(K, P) actor gradients of `windows` independent windows of `num_envs` environments."""
    env = G1ImitationEnv(cfg.env, motion, num_envs, seed=seed)
    shac = make_algorithm(env, cfg)
    shac.load_networks(state)
    grads = []
    for _ in range(windows):
        shac.obs = env.reset()
        loss, _ = shac.rollout()
        shac.actor.zero_grad()
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in shac.actor.parameters()]))
        env.cut_graph()
    return torch.stack(grads)


def markdown(source: str, rows: List[Tuple[str, str, Dict[str, float]]], windows: int, envs: int) -> str:
    lines = [f"# Actor-gradient consistency of `{source}`", "",
             f"{windows} independent windows of {envs} environments per variant (same env seed).", "",
             "| variant | overrides | pairwise cosine | signal fraction | mean norm | max norm |",
             "|---|---|---|---|---|---|"]
    for name, overrides, s in rows:
        lines.append(f"| {name} | {overrides or '(as trained)'} | {s['cosine']:.3f} +- {s['cosine_se']:.3f} | "
                     f"{s['signal_fraction']:.3f} | {s['norm_mean']:.3g} | {s['norm_max']:.3g} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", type=Path, help="a SHAC run folder or checkpoint file")
    p.add_argument("--windows", type=int, default=8, help="independent windows per variant (>= 2)")
    p.add_argument("--envs", type=int, help="environments per window (default: the checkpoint's)")
    p.add_argument("--variant", action="append", help="NAME:KEY=VALUE,... (repeatable; default: "
                   + "; ".join(DEFAULT_VARIANTS) + ")")
    p.add_argument("--seed", type=int, default=1, help="env seed (reference phases, randomisation)")
    p.add_argument("--out", type=Path, default=Path("out/gradient_consistency"))
    args = p.parse_args(argv)
    if args.windows < 2:
        p.error("--windows must be >= 2")
    try:
        variants = [parse_variant(v) for v in (args.variant or DEFAULT_VARIANTS)]
    except ValueError as e:
        p.error(str(e))
    path = find_checkpoint(args.checkpoint)
    ckpt = load_checkpoint(path)
    if ckpt["algorithm_name"] != "shac":
        p.error(f"{path}: a {ckpt['algorithm_name']} checkpoint; only SHAC's gradients go through the simulator")
    base = config_from_dict(ckpt["config"])
    motion = str(ckpt["run_info"]["motion"])
    envs = args.envs or base.shac.num_envs
    torch.set_num_threads(base.runner.torch_threads)
    try:
        configs = [(name, overrides, apply_overrides(base, overrides)) for name, overrides in variants]
        for _, _, cfg in configs:
            cfg.validate()
    except ConfigError as e:
        p.error(f"--variant: {e}")
    rows, results, by_bundle = [], {}, {}
    for name, overrides, cfg in configs:
        stats = direction_consistency(window_gradients(cfg, ckpt["algorithm"], motion, envs, args.windows,
                                                       args.seed).numpy())
        keys = [f"{key}={value}" for key, value in dotted_leaves(overrides)]
        rows.append((name, ", ".join(keys), stats))
        results[name] = {"overrides": overrides, **stats}
        if all(k.startswith("env.sim.bundle.enabled=") for k in keys):     # differs in bundling alone
            by_bundle.setdefault(cfg.env.sim.bundle.enabled, stats["cosine"])
        print(f"{name:18s} cosine {stats['cosine']:.3f} +- {stats['cosine_se']:.3f}  "
              f"signal {stats['signal_fraction']:.3f}  norm {stats['norm_mean']:.3g} "
              f"(max {stats['norm_max']:.3g})", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out / "gradient_consistency.md", markdown(str(path), rows, args.windows, envs))
    write_text_atomic(args.out / "gradient_consistency.json", json.dumps(
        {"checkpoint": str(path), "motion": motion, "windows": args.windows, "envs": envs, "seed": args.seed,
         "variants": results}, indent=2))
    print(f"grad_cosine_bundle={by_bundle.get(True, float('nan')):.4f} "
          f"grad_cosine_plain={by_bundle.get(False, float('nan')):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
