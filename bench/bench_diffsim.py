"""Throughput and backward cost of the Warp G1 simulator, against MuJoCo measured in the same run.

Scenario for both: the stand policy's PD gains holding the default pose after a 5 mm drop, physics
step h = 0.005 s (the simulator: dt 0.02 s with 4 substeps; MuJoCo: Euler at
0.005 s with the PD as a servo actuator, so no Python work between its steps).

- forward: environment-substeps per second, `--envs` environments in one batch (requires_grad
  False) vs `--mujoco-envs` MjData stepped one after another with mj_step on one core.
- backward: one 32-step window (`--window`) recorded on a wp.Tape (requires_grad True), then
  tape.backward with d loss / d q_final = 1, on warm buffers (`sim.segment.cut()` between windows); printed as
  (taped forward + backward) over the taped forward (the forward a training window runs anyway; the
  last line's ratio) and over the plain forward (requires_grad False) of the same window.
- tape memory per environment-substep: the wp.arrays alive after the taped forward that were not
  alive before it (found through the garbage collector, each view counted as the allocation it
  views, once; their .grad arrays are wp.arrays too and are counted), summed capacity in bytes, over
  envs x substeps. On CUDA the mempool's growth over the window is printed as a cross-check.
- `--bundle`: the same taped window with bundling on (B = 10, H = 2, kappa 300) and the robots
  dropped from staggered heights (BUNDLE_DROPS) so that their landings open bundles, timed against
  the same dropped window without bundling, interleaved, medians of `--repeats` warm windows each,
  with the bundling counters of the last one and both windows' tape memory (as above); with
  `--max-branch-rows R` the bundles hold at most R branch rows at once (`bundle.max_branch_rows`: a
  landing that finds no room is not bundled, and counts as refused each substep it is), with
  `--on-device` too kept on the device (`bundle.on_device`: R rows run and re-run at every substep).
- `--graphs`: a window of the standing scenario stepped through `torch_bridge` (what training
  runs: copies in and out, torch's autograd), taped with its backward pass and without gradients,
  by simulators that launch one kernel at a time and by simulators that replay captured graphs
  (`capture_graphs`, diffsim.step_graphs), interleaved, medians of `--repeats` warm windows; says
  whether both give bit-identical states and gradients; with `--on-device` also the bundled dropped
  window so (its step captured with its bundling).
- `--kernels`: a warm taped window's forward and backward kernel by kernel (diffsim.kernel_profile:
  launches, time, threads per launch; wall time on the CPU, Warp's activity timing on CUDA), with
  `--bundle` also the bundled dropped window's. On a GPU this says which kernels set a window's time
  and whether the device (kernel time near the wall time) or the host (far below) is the bound.

    python bench/bench_diffsim.py [--device cpu] [--envs 64] [--steps 50] [--bundle [--max-branch-rows R
        [--on-device]]]
        [--precision float32]
        [--kernels] [--graphs]
    python bench/bench_diffsim.py --device cuda:0 --envs 4096

`--precision float32` runs the simulator in float32 (`Model.from_mujoco(..., precision=)`); MuJoCo stays float64.

Last line: forward_vs_mujoco=<Warp env-substeps/s over MuJoCo's> backward_over_forward=<ratio>, with
`--bundle` also bundled_over_plain=<bundled taped window (forward + backward) over the plain one>, with
`--kernels` also kernels_over_wall=<the plain taped window's kernel time over its wall time>, with `--graphs`
also graphs_over_eager=<the taped window as graphs over one kernel at a time> and
plain_graphs_over_eager=<the same without gradients>, with `--on-device` too
bundled_graphs_over_eager=<the same for the bundled taped window>.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gc  # noqa: E402
import time  # noqa: E402
from typing import List, Optional  # noqa: E402

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import warp as wp  # noqa: E402

from bcg.contract.builtin import stand_gains  # noqa: E402
from bcg_train.diffsim import PRECISIONS, BundleConfig, Model, SimConfig, Simulator, Tape  # noqa: E402
from bcg_train.diffsim import mujoco_reference as vd  # noqa: E402  (the shared scenario)
from bcg_train.diffsim.kernel_profile import KernelProfile, profile_kernels  # noqa: E402

wp.config.log_level = wp.LOG_WARNING
DT = 0.02
SUBSTEPS = 4
CONFIG = SimConfig(kappa=300.0, substeps=SUBSTEPS)
BUNDLED = SimConfig(kappa=300.0, substeps=SUBSTEPS, bundle=BundleConfig(enabled=True, branches=10, span_steps=2))
BUNDLE_DROPS = (0.02, 0.15)     # m: pelvis heights above standing, spread evenly over the environments
BUNDLE_FALL = 1.0               # m/s: downward speed at release


def simulator(model: Model, envs: int, config: SimConfig, **kwargs) -> Simulator:
    """A simulator of `model`'s precision with `config`'s settings."""
    config = dataclasses.replace(config, precision=model.precision)
    return Simulator(model, envs, config, **kwargs)


def standing_setup(sim: Simulator):
    """(state_in, control) of the PD standing scenario for every environment of `sim`."""
    model = sim.model
    kp, kd = stand_gains(model.robot)
    s = sim.state().assign(model.default_qpos(vd.drop_height(model, vd.DROP_CLEARANCES[0])), np.zeros(model.nv))
    return s, sim.control().set_pd(q_target=model.robot.default_q, kp=kp, kd=kd)


def warp_forward_rate(model: Model, envs: int, steps: int) -> float:
    """Environment-substeps per second of the batched forward step (best of 3 runs of `steps`)."""
    sim = simulator(model, envs, CONFIG)
    s1 = sim.state()
    best = np.inf
    for _ in range(3):
        s0, ctrl = standing_setup(sim)
        sim.step(s0, s1, ctrl, DT)   # warm-up (kernel load)
        wp.synchronize_device(model.device)
        t = time.perf_counter()
        for _ in range(steps):
            sim.step(s0, s1, ctrl, DT)
            s0, s1 = s1, s0
        wp.synchronize_device(model.device)
        best = min(best, time.perf_counter() - t)
    return envs * steps * SUBSTEPS / best


def mujoco_rate(model: Model, envs: int, steps: int) -> float:
    """Environment-steps per second of mj_step at h = DT / SUBSTEPS, `envs` MjData in sequence."""
    robot = model.robot
    kp, kd = stand_gains(robot)
    m = vd.mujoco_model(robot, DT / SUBSTEPS, kp=kp, kd=kd)
    datas = [mujoco.MjData(m) for _ in range(envs)]
    for d in datas:
        vd.set_mujoco_state(model, d, model.default_qpos(vd.drop_height(model, vd.DROP_CLEARANCES[0])),
                            np.zeros(model.nv))
        d.ctrl[robot.actuator_ids] = robot.default_q
        mujoco.mj_step(m, d)   # warm-up
    n = steps * SUBSTEPS
    t = time.perf_counter()
    for d in datas:
        for _ in range(n):
            mujoco.mj_step(m, d)
    elapsed = time.perf_counter() - t
    if not all(np.isfinite(d.qpos).all() for d in datas):
        raise FloatingPointError("MuJoCo reference diverged")
    return envs * n / elapsed


def _live_arrays() -> dict:
    """{data pointer: bytes} of the allocations behind every live plain wp.array (a view counts as
    the array it views)."""
    live = {}
    for a in gc.get_objects():
        if type(a) is wp.array and a.ptr:
            while isinstance(a._ref, wp.array):
                a = a._ref
            live[a.ptr] = max(live.get(a.ptr, 0), a.capacity or 0)
    return live


def _bytes_since(before: dict) -> int:
    """Bytes of the live allocations (`_live_arrays`) that `before` did not hold."""
    return sum(c for p, c in _live_arrays().items() if p not in before)


def taped_forward(sim: Simulator, s0, ctrl, window: int):
    """`window` steps from s0 under ctrl on a new tape: (tape, the states, s0 first)."""
    tape = Tape()
    states = [s0]
    with tape:
        for _ in range(window):
            states.append(sim.state())
            sim.step(states[-2], states[-1], ctrl, DT)
    return tape, states


def taped_windows(model: Model, envs: int, window: int, repeats: int):
    """Taped forward + backward over `window` steps, `repeats` + 1 times on one Simulator (the first
    window allocates the buffers, the others reuse them after `sim.segment.cut()`). Returns the best warm
    (t_forward, t_backward), the first window's tape bytes, mempool growth or None, and whether
    every gradient was finite and non-zero."""
    sim = simulator(model, envs, CONFIG, requires_grad=True)
    dev = model.device
    pool = wp.get_device(dev).is_cuda and wp.is_mempool_enabled(dev)
    best, tape_bytes, pool_bytes, ok = (np.inf, np.inf), None, None, True
    for rep in range(repeats + 1):
        sim.segment.cut()
        s0, ctrl = standing_setup(sim)
        seed = wp.ones_like(s0.q, requires_grad=False)
        gc.collect()
        before = _live_arrays()
        pool0 = wp.get_mempool_used_mem_current(dev) if pool else 0
        wp.synchronize_device(dev)
        t0 = time.perf_counter()
        tape, states = taped_forward(sim, s0, ctrl, window)
        wp.synchronize_device(dev)
        t1 = time.perf_counter()
        if rep == 0:
            tape_bytes = _bytes_since(before)
            pool_bytes = wp.get_mempool_used_mem_current(dev) - pool0 if pool else None
        tape.backward(grads={states[-1].q: seed})
        wp.synchronize_device(dev)
        t2 = time.perf_counter()
        grad = ctrl.q_target.grad.numpy()
        ok = ok and bool(np.isfinite(grad).all() and np.abs(grad).max() > 0)
        if rep > 0 and (t1 - t0) + (t2 - t1) < sum(best):
            best = (t1 - t0, t2 - t1)
    return best[0], best[1], tape_bytes, pool_bytes, ok


def graph_windows(model: Model, envs: int, window: int, repeats: int, config: SimConfig = CONFIG,
                  dropped: bool = False):
    """The standing scenario's `window` steps (with `dropped`, `dropped_start`'s) through `torch_bridge`
    (what training runs), taped with a backward pass (loss: the sum of the final q) and without
    gradients, on simulators of `config` stepping one kernel at a time and as captured graphs
    (`capture_graphs`), interleaved, `repeats` warm windows each after two (the second captures); a
    bundling config's bundles are closed before each window. Returns ({(arm, "taped" | "plain"): median
    seconds}, whether the arms' final states and action gradients are bit-identical); ("capture", kind)
    is the graphs arm's second window, the one that captures."""
    import torch

    from bcg_train.diffsim import torch_bridge
    dev = str(model.device)
    kp, kd = (torch.tensor(g, device=dev) for g in stand_gains(model.robot))
    if dropped:
        q0, qd0 = (torch.tensor(x, device=dev) for x in dropped_start(model, envs))
    else:
        q0 = torch.tensor(np.tile(model.default_qpos(vd.drop_height(model, vd.DROP_CLEARANCES[0])), (envs, 1)),
                          device=dev)
        qd0 = torch.zeros(envs, model.nv, dtype=torch.float64, device=dev)
    target = torch.tensor(model.robot.default_q, device=dev).expand(envs, -1)
    arms = {"eager": False, "graphs": True}
    taped = {arm: simulator(model, envs, config, requires_grad=True, check_finite=False, capture_graphs=c)
             for arm, c in arms.items()}
    plain = {arm: simulator(model, envs, config, check_finite=False, capture_graphs=c) for arm, c in arms.items()}
    times = {(arm, kind): [] for arm in arms for kind in ("taped", "plain")}
    """Per (arm, kind) the timed windows; ("capture", kind): the graphs arm's capturing window."""
    results = {}
    for rep in range(repeats + 2):     # a step runs launch by launch first, is captured on its second run
        for arm in arms:
            for sim in (taped[arm], plain[arm]):
                if sim.bundler is not None:
                    sim.bundler.reset()
            actions = target.expand(window, -1, -1).clone().requires_grad_(True)
            wp.synchronize_device(model.device)
            t0 = time.perf_counter()
            q, qd = q0, qd0
            for k in range(window):
                q, qd = torch_bridge.step(taped[arm], q, qd, actions[k], DT, kp, kd)
            q.sum().backward()
            taped[arm].segment.cut()
            wp.synchronize_device(model.device)
            t1 = time.perf_counter()
            q, qd = q0, qd0
            for k in range(window):
                q, qd = torch_bridge.step_without_gradient(plain[arm], q, qd, target, DT, kp, kd)
            wp.synchronize_device(model.device)
            t2 = time.perf_counter()
            results[arm] = (q.cpu().numpy(), actions.grad.cpu().numpy())
            if rep >= 2:
                times[(arm, "taped")].append(t1 - t0)
                times[(arm, "plain")].append(t2 - t1)
            elif rep == 1 and arm == "graphs":
                times[("capture", "taped")], times[("capture", "plain")] = [t1 - t0], [t2 - t1]
    same = all(np.array_equal(a, b) for a, b in zip(results["eager"], results["graphs"]))
    return {key: float(np.median(t)) for key, t in times.items()}, same


def bundled_config(max_branch_rows: int, on_device: bool = False) -> SimConfig:
    """BUNDLED with at most `max_branch_rows` branch rows open at once (0: unbounded), its bundles kept
    on the device when `on_device` (`bundle.on_device`)."""
    return dataclasses.replace(BUNDLED, bundle=dataclasses.replace(BUNDLED.bundle, max_branch_rows=max_branch_rows,
                                                                   on_device=on_device))


def kernel_profiles(model: Model, envs: int, window: int, bundled: Optional[SimConfig]) -> List[KernelProfile]:
    """Kernel by kernel (diffsim.kernel_profile), a warm taped window's forward and its backward: the
    standing scenario, or given `bundled` (a bundling config) the dropped one with it."""
    sim = simulator(model, envs, bundled or CONFIG, requires_grad=True)
    setup = dropped_setup if bundled else standing_setup

    def start():
        """The scenario's start on the simulator's buffers, free again (`cut`), bundles closed."""
        sim.segment.cut()
        if sim.bundler is not None:
            sim.bundler.reset()
        return setup(sim)

    s0, ctrl = start()                              # warm: kernels loaded, buffers allocated
    tape, states = taped_forward(sim, s0, ctrl, window)
    tape.backward(grads={states[-1].q: wp.ones_like(s0.q, requires_grad=False)})
    s0, ctrl = start()
    with profile_kernels(model.device) as forward:
        tape, states = taped_forward(sim, s0, ctrl, window)
    seed = wp.ones_like(s0.q, requires_grad=False)
    with profile_kernels(model.device) as backward:
        tape.backward(grads={states[-1].q: seed})
    return [forward, backward]


def dropped_start(model: Model, envs: int):
    """(q (envs, nq), qd (envs, nv)): each robot in the default pose BUNDLE_DROPS[0] .. BUNDLE_DROPS[1]
    above standing (evenly spread), falling at BUNDLE_FALL."""
    q = np.tile(model.default_qpos(model.robot.standing_height), (envs, 1))
    q[:, 2] += np.linspace(*BUNDLE_DROPS, envs)
    qd = np.zeros((envs, model.nv))
    qd[:, 2] = -BUNDLE_FALL
    return q, qd


def dropped_setup(sim: Simulator):
    """(state_in, control): the PD standing scenario from `dropped_start`."""
    model = sim.model
    kp, kd = stand_gains(model.robot)
    return (sim.state().assign(*dropped_start(model, sim.num_envs)),
            sim.control().set_pd(q_target=model.robot.default_q, kp=kp, kd=kd))


def bundled_windows(model: Model, envs: int, window: int, repeats: int, bundled: SimConfig):
    """Taped forward + backward of the dropped scenario without bundling and with `bundled` (a bundling
    config), on warm buffers, interleaved. Returns ({arm: median s}, {arm: the first window's tape
    bytes, as `taped_windows`}, the last bundled window's BundleStats)."""
    sims = {name: simulator(model, envs, config, requires_grad=True)
            for name, config in (("plain", CONFIG), ("bundled", bundled))}
    times = {name: [] for name in sims}
    tape_bytes = {}
    for rep in range(repeats + 1):
        for name, sim in sims.items():
            sim.segment.cut()
            if sim.bundler is not None:
                sim.bundler.reset()
            s0, ctrl = dropped_setup(sim)
            if rep == 0:
                gc.collect()
                before = _live_arrays()
            wp.synchronize_device(model.device)
            t0 = time.perf_counter()
            tape, states = taped_forward(sim, s0, ctrl, window)
            if rep == 0:
                tape_bytes[name] = _bytes_since(before)
            tape.backward(grads={states[-1].q: wp.ones_like(s0.q, requires_grad=False)})
            wp.synchronize_device(model.device)
            if rep > 0:
                times[name].append(time.perf_counter() - t0)
    sims["bundled"].segment.cut()       # a device bundler's counters are read at the cut
    return {name: float(np.median(t)) for name, t in times.items()}, tape_bytes, sims["bundled"].bundle_stats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="Warp device (cpu, cuda:0)")
    parser.add_argument("--envs", type=int, default=64, help="batched environments of the Warp simulator")
    parser.add_argument("--mujoco-envs", type=int, default=64, help="sequential MjData of the reference")
    parser.add_argument("--steps", type=int, default=50, help="control steps (4 substeps each) per forward run")
    parser.add_argument("--window", type=int, default=32, help="control steps in the taped window")
    parser.add_argument("--repeats", type=int, default=3, help="taped windows measured (best is reported)")
    parser.add_argument("--model", default=None, help="MuJoCo XML (default: $BCG_G1_MODEL)")
    parser.add_argument("--bundle", action="store_true", help="also time a bundled window of dropped robots")
    parser.add_argument("--max-branch-rows", type=int, default=0,
                        help="with --bundle: at most this many branch rows open at once (0: unbounded)")
    parser.add_argument("--on-device", action="store_true",
                        help="with --bundle and --max-branch-rows: the bundles kept on the device (bundle.on_device); "
                             "with --graphs also the bundled window as captured graphs against one kernel at a time")
    parser.add_argument("--precision", choices=PRECISIONS, default="float64", help="the simulator's floating point")
    parser.add_argument("--kernels", action="store_true",
                        help="also profile a warm taped window kernel by kernel (and the bundled one with --bundle)")
    parser.add_argument("--graphs", action="store_true",
                        help="also time training's window stepped as captured graphs against one kernel at a time")
    args = parser.parse_args()
    if args.max_branch_rows and not args.bundle:
        parser.error("--max-branch-rows bounds the bundled window: give --bundle too")
    if args.on_device and not (args.bundle and args.max_branch_rows):
        parser.error("--on-device keeps the bundled window's bundles on the device, in max_branch_rows rows: give "
                     "--bundle and --max-branch-rows too")
    bundled = bundled_config(args.max_branch_rows, args.on_device)
    bound = f"at most {args.max_branch_rows} branch rows" if args.max_branch_rows else "unbounded"
    bound += ", on the device" if args.on_device else ""
    wp.init()
    model = Model.from_mujoco(args.model, device=args.device, precision=args.precision)
    print(f"device {args.device}: {wp.get_device(args.device).name}; envs {args.envs}; h {DT / SUBSTEPS} s; "
          f"{args.precision}")

    warp_rate = warp_forward_rate(model, args.envs, args.steps)
    mj_rate = mujoco_rate(model, args.mujoco_envs, args.steps)
    print(f"forward Warp   : {warp_rate:12.0f} env-substeps/s ({args.envs} envs batched)")
    print(f"forward MuJoCo : {mj_rate:12.0f} env-steps/s ({args.mujoco_envs} MjData, mj_step, one core)")

    t_fwd, t_bwd, tape_bytes, pool_bytes, ok = taped_windows(model, args.envs, args.window, args.repeats)
    env_substeps = args.envs * args.window * SUBSTEPS
    t_plain = env_substeps / warp_rate
    print(f"taped window   : {args.window} steps x {SUBSTEPS} substeps, forward {t_fwd * 1e3:.1f} ms, "
          f"backward {t_bwd * 1e3:.1f} ms (best of {args.repeats} warm windows), gradient finite and nonzero: {ok}")
    print(f"forward rate with requires_grad: {env_substeps / t_fwd:.0f} env-substeps/s")
    print(f"(taped forward + backward) / taped forward: {(t_fwd + t_bwd) / t_fwd:.3f}; "
          f"/ plain forward ({t_plain * 1e3:.1f} ms): {(t_fwd + t_bwd) / t_plain:.3f}")
    print(f"tape memory    : {tape_bytes / env_substeps / 1024:.1f} KiB per env-substep "
          f"({tape_bytes / 2**20:.1f} MiB for the window; new live wp.arrays incl. grads)")
    if pool_bytes is not None:
        print(f"mempool growth : {pool_bytes / env_substeps / 1024:.1f} KiB per env-substep")
    last = f"forward_vs_mujoco={warp_rate / mj_rate:.3f} backward_over_forward={(t_fwd + t_bwd) / t_fwd:.3f}"
    if args.bundle:
        t, mem, st = bundled_windows(model, args.envs, args.window, args.repeats, bundled)
        print(f"dropped window : plain {t['plain'] * 1e3:.1f} ms, bundled {t['bundled'] * 1e3:.1f} ms (taped forward + "
              f"backward, medians of {args.repeats}); {st.bundles} bundles ({bound}; {st.skipped_events} env-substeps "
              f"refused), {st.branch_substeps} branch-substeps "
              f"for {st.env_substeps} env-substeps; tape memory plain {mem['plain'] / 2**20:.1f} MiB, bundled "
              f"{mem['bundled'] / 2**20:.1f} MiB")
        last += f" bundled_over_plain={t['bundled'] / t['plain']:.3f}"
    if args.graphs:
        t, same = graph_windows(model, args.envs, args.window, args.repeats)
        print(f"captured graphs: {args.window}-step window through torch_bridge, medians of {args.repeats}: taped "
              f"(forward + backward) {t[('eager', 'taped')] * 1e3:.1f} ms one kernel at a time, "
              f"{t[('graphs', 'taped')] * 1e3:.1f} ms as graphs; without gradients {t[('eager', 'plain')] * 1e3:.1f} "
              f"ms, {t[('graphs', 'plain')] * 1e3:.1f} ms; final states and gradients bit-identical: {same}; the "
              f"window that captured: taped {t[('capture', 'taped')] * 1e3:.1f} ms, without gradients "
              f"{t[('capture', 'plain')] * 1e3:.1f} ms")
        last += (f" graphs_over_eager={t[('graphs', 'taped')] / t[('eager', 'taped')]:.3f}"
                 f" plain_graphs_over_eager={t[('graphs', 'plain')] / t[('eager', 'plain')]:.3f}")
        if args.on_device:
            t, same = graph_windows(model, args.envs, args.window, args.repeats, bundled, dropped=True)
            print(f"captured bundled graphs: the dropped {args.window}-step window bundled ({bound}) through "
                  f"torch_bridge, medians of {args.repeats}: taped {t[('eager', 'taped')] * 1e3:.1f} ms one kernel at "
                  f"a time, {t[('graphs', 'taped')] * 1e3:.1f} ms as graphs; without gradients "
                  f"{t[('eager', 'plain')] * 1e3:.1f} ms, {t[('graphs', 'plain')] * 1e3:.1f} ms; bit-identical: {same}")
            last += f" bundled_graphs_over_eager={t[('graphs', 'taped')] / t[('eager', 'taped')]:.3f}"
    if args.kernels:
        for config in (None, bundled) if args.bundle else (None,):
            forward, backward = kernel_profiles(model, args.envs, args.window, config)
            name = f"bundled dropped window ({bound})" if config else "taped window"
            print(f"\n{forward.table(f'{name}, forward, kernel by kernel')}\n\n"
                  f"{backward.table(f'{name}, backward, kernel by kernel')}\n")
            if config is None:
                share = (forward.kernel_s + backward.kernel_s) / (forward.wall_s + backward.wall_s)
                last += f" kernels_over_wall={share:.3f}"
    print(last)


if __name__ == "__main__":
    main()
