"""Where a training iteration's time goes, by phase, measured by the training loop itself.

For SHAC with bundling, SHAC without bundling (the preset's `num_envs_without_bundle`) and PPO at
`--preset` on `--device`: builds the G1 imitation env on `--motion` as `bcg-train` does, runs
`--warmup` iterations, then `--iterations` iterations of the real runner (logs, checkpoint and curves
included, in a temporary folder) with a `PhaseTimer` recording (bcg_train.algo.phases: the
algorithms mark their phases; this script adds the simulator's own phases by wrapping `sim.step`,
the torch bridge's step and forward kinematics). Per phase: milliseconds per iteration (exclusive:
nested phases are subtracted), share of the iteration, and host synchronisations per iteration
(explicit device-to-host conversions; a lower bound on the CPU, see bcg_train.algo.phases).
Checkpoints and curves are billed per iteration as their cost per call over `checkpoint_every` /
`curves_every`. The simulator's own time is "sim forward" (`Simulator.step`, bundling included)
plus "sim backward" (the Warp tape's backward of those steps). Phases run in the update thread
(critic and discriminator updates, overlapped with the actor's backward pass) are listed apart and
not added to the iteration; the main thread's "wait for updates" is what they did not hide.

    python bench/bench_train.py [--preset cpu-small] [--device cpu] [--motion dance] [--iterations 3]
        [--warmup 1] [--variants shac,shac-nobundle,ppo] [--set shac.critic_iterations=4 ...]

Last line: train_over_sim=<SHAC (bundling) iteration time / its simulator forward + backward time>
shac_steps_per_s=<SHAC environment steps per second> ppo_steps_per_s=<PPO environment steps per second>.
"""
import argparse
import contextlib
import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Set

import torch

from bcg_train.algo.phases import PhaseTimer, count_host_syncs, phase
from bcg_train.cli import build_runner, parse_assignments
from bcg_train.train_config import TrainConfig, apply_overrides, load_preset

VARIANTS = ("shac", "shac-nobundle", "ppo")
SIM_PHASES = ("sim forward", "sim backward")
"""The simulator's own work, the denominator of train_over_sim."""
AMORTISED = {"checkpoint": "checkpoint_every", "curves": "curves_every"}
"""Phases that run every N iterations: billed as their cost per call / N (the bench makes them run
in its first timed iteration)."""
ONCE_PER_RUN = ("final curves",)
"""Phases of the end of a run, left out."""


@dataclasses.dataclass
class Measurement:
    variant: str
    num_envs: int
    env_steps_per_iteration: int
    ms: Dict[str, float]
    """Phase -> milliseconds per iteration."""
    syncs: Dict[str, float]
    """Phase -> host synchronisations per iteration."""
    background: Set[str]
    """Phases that ran in another thread, overlapped with the others (not part of the iteration's sum)."""

    @property
    def iteration_ms(self) -> float:
        return sum(v for k, v in self.ms.items() if k not in self.background)

    @property
    def sim_ms(self) -> float:
        return sum(self.ms.get(p, 0.0) for p in SIM_PHASES)

    @property
    def steps_per_s(self) -> float:
        return self.env_steps_per_iteration / (self.iteration_ms / 1e3)


def variant_config(cfg: TrainConfig, variant: str, iterations: int) -> TrainConfig:
    algorithm = "ppo" if variant == "ppo" else "shac"
    bundle = variant == "shac" if algorithm == "shac" else cfg.bundle
    cfg = apply_overrides(cfg, {"algorithm": algorithm, "env": {"sim": {"bundle": {"enabled": bundle}}}})
    cfg = cfg.with_iterations(iterations)
    cfg.validate()
    return cfg


def timed(fn, name: str):
    def wrapper(*args, **kwargs):
        with phase(name):
            return fn(*args, **kwargs)
    return wrapper


@contextlib.contextmanager
def simulator_phases(env) -> Iterator[None]:
    """Mark the simulator's own phases inside the env: `Simulator.step` of both of its simulators,
    the torch bridge's forward glue and backward, and forward kinematics (forward and backward)."""
    from bcg_train.diffsim import torch_bridge
    for sim in (env.sim, env.sim_plain):
        sim.step = timed(sim.step, "sim forward")
    originals = [(cls, name, cls.__dict__[name]) for cls in (torch_bridge._SimStep, torch_bridge._BodyFrames)
                 for name in ("forward", "backward")]
    names = {("_SimStep", "forward"): "sim glue", ("_SimStep", "backward"): "sim backward",
             ("_BodyFrames", "forward"): "forward kinematics", ("_BodyFrames", "backward"): "forward kinematics"}
    for cls, name, method in originals:
        setattr(cls, name, staticmethod(timed(method.__func__, names[cls.__name__, name])))
    try:
        yield
    finally:
        for cls, name, method in originals:
            setattr(cls, name, method)


def measure(cfg: TrainConfig, variant: str, motion: str, device: str, warmup: int, iterations: int) -> Measurement:
    cfg = variant_config(cfg, variant, warmup + iterations)
    run_cfg = apply_overrides(cfg, {"runner": {"checkpoint_every": warmup + 1, "curves_every": warmup + 1}})
    synchronize = None
    if torch.device(device).type == "cuda":
        import warp as wp

        def synchronize():
            torch.cuda.synchronize()
            wp.synchronize()
    with tempfile.TemporaryDirectory() as run_dir:
        runner = build_runner(run_cfg, {"motion": motion, "device": device, "preset": "bench"}, Path(run_dir))
        alg = runner.algorithm
        timer = PhaseTimer(synchronize)
        iteration = alg.iteration

        def iteration_after_warmup(it: int):
            if it == warmup:
                timer.reset()
            return iteration(it)
        alg.iteration = iteration_after_warmup
        with simulator_phases(alg.env), timer, count_host_syncs(timer):
            runner.train()
    ms, syncs = {}, {}
    for name, seconds in timer.seconds.items():
        if name in ONCE_PER_RUN:
            continue
        every = getattr(cfg.runner, AMORTISED[name]) if name in AMORTISED else 1
        calls = timer.calls[name] if name in AMORTISED else iterations
        ms[name] = 1e3 * seconds / calls / every
        syncs[name] = timer.syncs.get(name, 0) / calls / every
    return Measurement(variant, alg.env.num_envs, alg.env_steps_per_iteration, ms, syncs, set(timer.background))


def table(results: List[Measurement]) -> str:
    background = set().union(*(r.background for r in results))
    phases = sorted({p for r in results for p in r.ms},
                    key=lambda p: (p in background, -max(r.ms.get(p, 0.0) for r in results)))
    head = "| phase | " + " | ".join(f"{r.variant} ({r.num_envs} envs): ms, share, syncs" for r in results) + " |"
    lines = [head, "|---|" + "---|" * len(results)]
    for p in phases:
        cells = [f"{r.ms[p]:.1f}, {100 * r.ms[p] / r.iteration_ms:.1f}%, {r.syncs[p]:.0f}" if p in r.ms else "-"
                 for r in results]
        label = f"{p} (update thread, overlapped)" if p in background else p
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| **iteration** | " + " | ".join(
        f"{r.iteration_ms:.0f}, 100%, {sum(r.syncs.values()):.0f}" for r in results) + " |")
    lines.append("| iteration / simulator (forward + backward) | " + " | ".join(
        f"{r.iteration_ms / r.sim_ms:.2f}" if r.sim_ms else "-" for r in results) + " |")
    lines.append("| environment steps / s | " + " | ".join(f"{r.steps_per_s:.0f}" for r in results) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="cpu-small")
    p.add_argument("--device", default="cpu")
    p.add_argument("--motion", default="dance")
    p.add_argument("--iterations", type=int, default=3, help="timed iterations per variant")
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations first (kernel loading, allocations)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a preset value")
    args = p.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or not variants:
        p.error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")
    if args.iterations < 1 or args.warmup < 1:
        p.error("--iterations and --warmup must be at least 1")
    cfg = apply_overrides(load_preset(args.preset), parse_assignments(args.set))
    results = []
    for variant in variants:
        t = time.monotonic()
        results.append(measure(cfg, variant, args.motion, args.device, args.warmup, args.iterations))
        print(f"bench_train: {variant} measured in {time.monotonic() - t:.0f} s", file=sys.stderr, flush=True)
    print(f"# bench_train: preset {args.preset}, device {args.device}, motion {args.motion}, "
          f"{args.iterations} timed iterations after {args.warmup}, torch threads {torch.get_num_threads()}")
    print(table(results))
    by_name = {r.variant: r for r in results}
    shac, ppo = by_name.get("shac"), by_name.get("ppo")
    ratio = f"{shac.iteration_ms / shac.sim_ms:.2f}" if shac else "nan"
    shac_rate = f"{shac.steps_per_s:.0f}" if shac else "nan"
    ppo_rate = f"{ppo.steps_per_s:.0f}" if ppo else "nan"
    print(f"train_over_sim={ratio} shac_steps_per_s={shac_rate} ppo_steps_per_s={ppo_rate}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
