"""Where a training iteration's time goes, by phase, measured by the training loop itself.

For SHAC with bundling, SHAC without bundling (the preset's `num_envs_without_bundle`) and PPO at
`--preset` on `--device`: builds the G1 imitation env on `--motion` as `bcg-train` does, runs
`--warmup` iterations, then `--iterations` iterations of the real runner (logs, checkpoint and curves
included, in a temporary folder) with a `PhaseTimer` recording (bcg_train.algo.phases: the
algorithms mark their phases; this script adds the simulator's own phases by wrapping `sim.step`,
the replay of its captured steps (diffsim.step_graphs), the torch bridge's step and forward
kinematics). Per phase: milliseconds per iteration (exclusive:
nested phases are subtracted), share of the iteration ("beside" for the updates that run in the
update thread while the loop backpropagates, `concurrent_updates`: their time overlaps the loop's
and is not part of the iteration's), host synchronisations per iteration
(explicit device-to-host conversions; a lower bound on the CPU, see bcg_train.algo.phases) and Warp
kernel launches per iteration (forward and adjoint; what sets a GPU's time at small batches).
Checkpoints and curves are billed per iteration as their cost per call over `checkpoint_every` /
`curves_every`. The simulator's own time is "sim forward" (`Simulator.step`, bundling included, or
a captured step's replay) plus "sim backward" (the Warp tape's backward of those steps). With
bundling, its counters over the run (bundles, environment-substeps refused under
`bundle.max_branch_rows`, fraction bundled, rows per environment-substep) say what the time bought.

    python bench/bench_train.py [--preset cpu-small] [--device cpu] [--motion dance] [--iterations 3]
        [--warmup 2] [--variants shac,shac-nobundle,ppo] [--set shac.critic_iterations=4 ...]

The simulator's time is also measured alone (`simulator_alone`: the timed iterations' windows
replayed right after them, same start states and actions, nothing else running in this process), a
cross-check on a shared machine where other processes slow the simulator down at some moments and
not at others; the in-loop ratio compares times of the same windows and is the steadier one.

Last line: train_over_sim=<SHAC (bundling) iteration time / its simulator's forward + backward time in
the same iterations> shac_steps_per_s=<SHAC environment steps per second>
ppo_steps_per_s=<PPO environment steps per second>.
"""
import argparse
import contextlib
import dataclasses
import importlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import torch

from bcg_train.algo.phases import PhaseTimer, count_host_syncs, count_kernel_launches, phase
from bcg_train.cli import build_runner, parse_assignments
from bcg_train.train_config import TrainConfig, apply_overrides, load_preset

VARIANTS = ("shac", "shac-nobundle", "ppo")
SIM_PHASES = ("sim forward", "sim backward")
"""The simulator's own work, the denominator of train_over_sim."""
AMORTISED = {"checkpoint": "checkpoint_every"}
"""Phases that run every N iterations: billed as their cost per call / N (the bench makes them run
in its first timed iteration). Learning curves are billed as one drawing in this process over
`curves_every`, whether the runner draws them in its own thread or in another process."""
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
    launches: Dict[str, float]
    """Phase -> Warp kernel launches per iteration."""
    sim_alone: Dict[str, float]
    """Milliseconds per window of "sim forward" and "sim backward" when nothing else runs (`simulator_alone`)."""
    parallel: Set[str]
    """Phases that ran in the update thread, beside the loop's own (not part of the iteration's sum)."""
    bundling: str
    """Bundling's counters over the run (warm-up included), or "-" without bundling."""

    @property
    def sim_alone_ms(self) -> float:
        return sum(self.sim_alone.values())

    @property
    def iteration_ms(self) -> float:
        return sum(ms for p, ms in self.ms.items() if p not in self.parallel)

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
    """Mark the simulator's own phases inside the env: `Simulator.step` of both of its simulators and
    the forward of their captured steps (`CapturedStep.forward`: a graph's replay, or the step's
    launches when it runs them), the torch bridge's forward glue and backward, and forward kinematics
    (forward and backward), in the simulator package of the env's precision."""
    torch_bridge = env.bridge
    captured_step = importlib.import_module(".step_graphs", torch_bridge.__package__).CapturedStep
    for sim in (env.sim, env.sim_plain):
        sim.step = timed(sim.step, "sim forward")
    originals = [(cls, name, cls.__dict__[name]) for cls in (torch_bridge._SimStep, torch_bridge._BodyFrames)
                 for name in ("forward", "backward")]
    names = {("_SimStep", "forward"): "sim glue", ("_SimStep", "backward"): "sim backward",
             ("_BodyFrames", "forward"): "forward kinematics", ("_BodyFrames", "backward"): "forward kinematics"}
    for cls, name, method in originals:
        setattr(cls, name, staticmethod(timed(method.__func__, names[cls.__name__, name])))
    captured_forward = captured_step.forward
    captured_step.forward = timed(captured_forward, "sim forward")
    try:
        yield
    finally:
        for cls, name, method in originals:
            setattr(cls, name, method)
        captured_step.forward = captured_forward


def measure(cfg: TrainConfig, variant: str, motion: str, device: str, warmup: int, iterations: int) -> Measurement:
    cfg = variant_config(cfg, variant, warmup + iterations)
    once = {"checkpoint_every": warmup + 1, "curves_every": warmup + iterations + 1}   # see AMORTISED
    run_cfg = apply_overrides(cfg, {"runner": once})
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
        windows, stop_recording = record_windows(alg, warmup, timer)
        with simulator_phases(alg.env):
            with timer, count_host_syncs(timer), count_kernel_launches(timer):
                runner.train()
            stop_recording()
            bundling = bundling_counters(alg.env.sim.bundle_stats)
            sim_alone = simulator_alone(alg.env, windows, alg.name == "shac", synchronize)
        curves_s = drawing_time(Path(run_dir))
    ms, syncs, launches = {"curves": 1e3 * curves_s / cfg.runner.curves_every}, {"curves": 0.0}, {"curves": 0.0}
    for name, seconds in timer.seconds.items():
        if name in ONCE_PER_RUN:
            continue
        every = getattr(cfg.runner, AMORTISED[name]) if name in AMORTISED else 1
        calls = timer.calls[name] if name in AMORTISED else iterations
        ms[name] = 1e3 * seconds / calls / every
        syncs[name] = timer.syncs.get(name, 0) / calls / every
        launches[name] = timer.launches.get(name, 0) / calls / every
    return Measurement(variant, alg.env.num_envs, alg.env_steps_per_iteration, ms, syncs, launches, sim_alone,
                       set(timer.parallel), bundling)


def bundling_counters(st) -> str:
    """Bundles opened, environment-substeps refused for want of rows (`bundle.max_branch_rows`), the
    fraction of environment-substeps in a bundle and the rows simulated per environment-substep, of
    a simulator's BundleStats (None: "-")."""
    if st is None or not st.env_substeps:
        return "-"
    return (f"{st.bundles} bundles, {st.skipped_events} refused, {st.triggered_fraction:.3f} bundled, "
            f"rows {1 + st.branch_substeps / st.env_substeps:.2f}x")


def drawing_time(run_dir: Path) -> float:
    """Seconds to draw the run's learning curves once, in this process (the second of two drawings:
    matplotlib's import is a one-off)."""
    from bcg_train import curves
    for _ in range(2):
        start = time.perf_counter()
        curves.plot_runs({"run": curves.read_metrics(run_dir)}, run_dir / "bench_curves")
    return time.perf_counter() - start


def record_windows(alg, warmup: int, timer: PhaseTimer):
    """Wrap `alg.iteration` and `alg.env.step` so that the timer starts after `warmup` iterations and
    every timed iteration's env state at its start and actions are recorded. Returns the list being
    filled, [(env state, [actions (N, act_dim) per step])], and a function that undoes the wrapping."""
    windows: List[Tuple[dict, List[torch.Tensor]]] = []
    iteration, env_step = alg.iteration, alg.env.step

    def timed_iteration(it: int):
        if it == warmup:
            timer.reset()
        if it >= warmup:
            windows.append((alg.env.state_dict(), []))
        return iteration(it)

    def recorded_step(actions: torch.Tensor):
        if windows:
            windows[-1][1].append(actions.detach().clone())
        return env_step(actions)
    def stop():
        alg.iteration, alg.env.step = iteration, env_step
    alg.iteration, alg.env.step = timed_iteration, recorded_step
    return windows, stop


def simulator_alone(env, windows: List[Tuple[dict, List[torch.Tensor]]], gradients: bool,
                    synchronize) -> Dict[str, float]:
    """Milliseconds of the simulator's own work ("sim forward" + "sim backward") per window, replaying
    the recorded windows (same start states, same actions, hence the same contacts and bundles) with
    nothing else running: the env steps, and with `gradients` (SHAC) a backward pass of a loss over
    the observations through them (PPO's steps take no gradient)."""
    timer = PhaseTimer(synchronize)
    with timer, torch.set_grad_enabled(gradients):
        for state, actions in windows:
            env.load_state_dict(state)
            loss = 0.0
            for a in actions:
                loss = loss + env.step(a.requires_grad_(gradients)).obs_before_reset.square().mean()
            if gradients:
                loss.backward()
                env.cut_graph()
    return {p: 1e3 * timer.seconds[p] / len(windows) for p in SIM_PHASES}


def table(results: List[Measurement]) -> str:
    phases = sorted({p for r in results for p in r.ms}, key=lambda p: -max(r.ms.get(p, 0.0) for r in results))
    head = "| phase | " + " | ".join(f"{r.variant} ({r.num_envs} envs): ms, share, syncs, launches"
                                     for r in results) + " |"
    lines = [head, "|---|" + "---|" * len(results)]
    for p in phases:
        cells = [f"{r.ms[p]:.1f}, {'beside' if p in r.parallel else f'{100 * r.ms[p] / r.iteration_ms:.1f}%'}, "
                 f"{r.syncs[p]:.0f}, {r.launches[p]:.0f}" if p in r.ms else "-" for r in results]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines.append("| **iteration** | " + " | ".join(
        f"{r.iteration_ms:.0f}, 100%, {sum(r.syncs.values()):.0f}, {sum(r.launches.values()):.0f}"
        for r in results) + " |")
    lines.append("| simulator alone, ms per window (forward + backward) | " + " | ".join(
        " + ".join(f"{r.sim_alone[p]:.0f}" for p in SIM_PHASES) for r in results) + " |")
    lines.append("| iteration / simulator in the loop | " + " | ".join(
        f"{r.iteration_ms / r.sim_ms:.2f}" if r.sim_ms else "-" for r in results) + " |")
    lines.append("| iteration / simulator alone | " + " | ".join(
        f"{r.iteration_ms / r.sim_alone_ms:.2f}" if r.sim_alone_ms else "-" for r in results) + " |")
    lines.append("| bundling over the run (warm-up included) | " + " | ".join(r.bundling for r in results) + " |")
    lines.append("| environment steps / s | " + " | ".join(f"{r.steps_per_s:.0f}" for r in results) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="cpu-small")
    p.add_argument("--device", default="cpu")
    p.add_argument("--motion", default="dance")
    p.add_argument("--iterations", type=int, default=3, help="timed iterations per variant")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed iterations first (kernel loading, allocations, the simulator's graph captures)")
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
