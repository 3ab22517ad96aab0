"""`bcg-train`: train a G1 imitation policy (SHAC through the differentiable simulator, or the PPO baseline).

    bcg-train [--preset track] [--algo shac|ppo] [--motion NAME|FILE] [--motion-dir DIR] [--kappa K]
              [--no-bundle] [--device cpu|cuda:0] [--run-dir DIR] [--set env.sim.substeps=8 ...]
    bcg-train --resume RUN_DIR_OR_CHECKPOINT [--device cuda:0] [--iterations N]
    either form also takes [--stop-at K]; a new run also [--init-from CHECKPOINT]

Data-parallel training: `torchrun --nproc_per_node N --no-python bcg-train ...` (the same
arguments) runs N ranks, each with `cfg.num_envs()` environments of its own (seeded with
`runner.seed` + rank; on CUDA each rank takes the GPU of its local rank), gradients and statistics
averaged over the ranks (bcg_train.algo.data_parallel); rank 0 writes the run folder. One process
is the same as `--nproc_per_node 1`.

`--kappa K` and `--no-bundle` are short for `--set env.sim.kappa=K` and
`--set env.sim.bundle.enabled=false`: every setting lives in the config, and a run's config.yaml and
checkpoints record it. A run folder gets metrics.csv, tensorboard/, checkpoints/, curves/ and
config.yaml. A resumed run continues with the checkpoint's own settings in its own folder;
`--iterations N` extends it to N iterations in all (the learning rates, which decay linearly over
the run, then decay over the new total: they rise at the resume). `--stop-at K` stops after
iteration K with its checkpoint written, as Ctrl-C there would, the schedule still planned to the
end. The run records its schedule (`run_info["schedule"]`: [first iteration, iterations planned]
per start and extension), so `bcg-ship` can write the commands that train it again.
`--init-from CHECKPOINT` starts a new run from another run's trained networks (same action layout,
the same observation terms or its first ones: `Runner.init_from`), with its own optimisers and
schedule: e.g. fine-tuning a policy that already balances on a new motion; the run records where
it started. `--init-from POLICY.onnx` starts from an exported policy: its actor and observation
normaliser, new critics and ADD discriminator (hold the actor while they learn with
`--set shac.actor_warmup_iterations=N`). The environment is
`cfg.num_envs()` G1 imitation environments seeded from `cfg.runner.seed` (`build_env`).
"""
import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional

import yaml

from bcg.atomic_file import write_text_atomic
from bcg.config_check import ConfigError, apply_overrides, config_error, parse_assignments
from bcg.config_files import config_dir
from bcg.motion import MotionFileError
from bcg.motion.segments import ENV_VAR as MOTION_DIR_ENV_VAR
from bcg.motion.segments import resolve_motion_dir

from .checkpoint import CHECKPOINT_DIR, CheckpointError, checkpoint_name, find_checkpoint, load_checkpoint
from .motion.library import motion_help, motion_label
from .run_lock import RunFolderInUse, RunFolderLock

if TYPE_CHECKING:         # torch, Warp and MuJoCo load where training starts: `--help` needs none of them
    from .algo.data_parallel import Ranks
    from .env_api import DiffEnv
    from .runner import Runner
    from .train_config import TrainConfig

EXIT_USAGE = 2
DEFAULT_PRESET = "track"
"""The preset of a new run that names none: config/train/track.yaml, the recipe for a new motion."""
PICK_DIR = "policy"
"""Where a screened run's pick is exported (RUN/policy/NAME.onnx and its sidecar)."""


def build_env(cfg: "TrainConfig", motion: str, device: str) -> "DiffEnv":
    """`cfg.num_envs()` G1 imitation environments on `motion`, seeded from `cfg.runner.seed` + this
    process's rank (the import is here: it loads Warp and MuJoCo, which nothing else of the command
    line needs)."""
    from .algo.data_parallel import Ranks
    from .imitation.env import G1ImitationEnv
    return G1ImitationEnv(cfg.env, motion, cfg.num_envs(), device, seed=cfg.runner.seed + Ranks().rank)


def start_distributed() -> "Ranks":
    """Under torchrun (WORLD_SIZE > 1 in the environment): join the default process group (gloo for
    CPU tensors, NCCL for CUDA ones where CUDA exists) and take the local rank's GPU. Returns this
    process's `Ranks` (a world of one without torchrun)."""
    import torch

    from .algo.data_parallel import Ranks
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.distributed.is_initialized():
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        torch.distributed.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo")
    return Ranks()


def rank_device(device: str) -> str:
    """The device of this process: with several ranks, a CUDA device becomes the local rank's GPU."""
    import torch

    from .algo.data_parallel import Ranks
    if Ranks().world_size > 1 and torch.device(device).type == "cuda":
        return f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
    return device


def default_run_dir(cfg: "TrainConfig", run_info: Dict) -> Path:
    motion = motion_label(str(run_info["motion"]))
    bundle = "bcg" if cfg.bundle else "nobundle"
    return Path(cfg.runner.log_dir) / (f"{time.strftime('%Y%m%d-%H%M%S')}_{cfg.algorithm}_{motion}"
                                       f"_k{cfg.env.sim.kappa:g}_{bundle}")


def build_runner(cfg: "TrainConfig", run_info: Dict, run_dir: Path) -> "Runner":
    import torch

    from .runner import Runner, make_algorithm
    if cfg.runner.torch_threads:
        torch.set_num_threads(cfg.runner.torch_threads)
    env = build_env(cfg, run_info["motion"], rank_device(run_info["device"]))
    return Runner(make_algorithm(env, cfg), cfg, run_dir, run_info)


def shorthand_overrides(args: argparse.Namespace) -> Dict:
    """--kappa and --no-bundle as the config overrides they stand for."""
    sim: Dict = {}
    if args.kappa is not None:
        sim["kappa"] = args.kappa
    if args.no_bundle:
        sim["bundle"] = {"enabled": False}
    return {"env": {"sim": sim}} if sim else {}


def algorithm(name: str) -> str:
    """`--algo`'s value, checked against the registry of algorithms (imported only when it is given)."""
    from .train_config import ALGORITHMS
    if name not in ALGORITHMS:
        raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(ALGORITHMS)})")
    return name


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bcg-train", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", help=f"config/train/<NAME>.yaml (default {DEFAULT_PRESET}, the recipe for a new motion; "
                                    "paper, cpu-small, cpu-smoke, ...) or a YAML file")
    p.add_argument("--algo", type=algorithm, metavar="NAME",
                   help="override the preset's algorithm: shac (through the differentiable simulator) or ppo "
                        "(the baseline)")
    p.add_argument("--motion", default="run", help=motion_help())
    p.add_argument("--motion-dir", help=f"folder of the named segments' motion files (sets ${MOTION_DIR_ENV_VAR})")
    p.add_argument("--kappa", type=float, help="contact stiffness k (1/m), short for --set env.sim.kappa=K")
    p.add_argument("--no-bundle", action="store_true",
                   help="train without bundled contact gradients, short for --set env.sim.bundle.enabled=false")
    p.add_argument("--device", help="torch/Warp device, e.g. cpu or cuda:0 (default cpu; on resume: the checkpoint's)")
    p.add_argument("--run-dir", type=Path,
                   help="run folder (default: <runner.log_dir>/<time>_<algo>_<motion>_k<K>_<bcg|nobundle>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset value (repeatable)")
    p.add_argument("--resume", type=Path, help="continue a run: its folder or a checkpoint file")
    p.add_argument("--iterations", type=int, help="with --resume: extend the run to this many iterations in all")
    p.add_argument("--init-from", type=Path, metavar="CHECKPOINT|POLICY.onnx",
                   help="a new run starts from this checkpoint's networks (a file, or a run folder: its newest), "
                        "or from an exported policy's actor and normaliser (POLICY.onnx)")
    p.add_argument("--no-motion-check", action="store_true",
                   help="train on a motion file even when `python -m bcg_train.motion check` finds it implausible")
    p.add_argument("--stop-at", type=int, metavar="K",
                   help="stop after iteration K (its checkpoint written), the schedule still planned to the end")
    return p


def extend(cfg: "TrainConfig", iterations: int, done: int) -> "TrainConfig":
    """`cfg` with its algorithm run to `iterations` in all; ConfigError unless that is more than `done`."""
    if iterations <= done:
        raise ConfigError(f"--iterations: {iterations} is not more than the {done} the checkpoint has done")
    cfg = cfg.with_iterations(iterations)
    cfg.validate()
    return cfg


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    ranks = start_distributed()
    try:
        return train(args, ranks)
    finally:
        if ranks.world_size > 1:
            import torch
            torch.distributed.destroy_process_group()


def train(args: argparse.Namespace, ranks: "Ranks") -> int:
    lead = ranks.rank == 0
    with contextlib.ExitStack() as folder:
        return _train(args, ranks, lead, folder)


def _train(args: argparse.Namespace, ranks: "Ranks", lead: bool, folder: contextlib.ExitStack) -> int:
    """`train` with `folder` holding the run folder's lock (rank 0) until the caller's block ends."""
    try:
        if args.motion_dir:
            os.environ[MOTION_DIR_ENV_VAR] = str(resolve_motion_dir(args.motion_dir))
        if args.resume is not None:
            runner = resumed_runner(args, lead, folder)
        else:
            runner = new_runner(args, ranks, lead, folder)
        check_stop_at(args.stop_at, runner)
    except (ConfigError, CheckpointError, MotionFileError, RunFolderInUse) as e:
        print(f"bcg-train: {e}", file=sys.stderr)
        return EXIT_USAGE
    return run_training(runner, args.stop_at, ranks.world_size, lead)


def check_resume_options(args: argparse.Namespace) -> None:
    """ConfigError for an option a resumed run does not take: it keeps its checkpoint's settings and networks."""
    if args.preset or args.algo or args.set or args.kappa is not None or args.no_bundle or args.run_dir:
        raise ConfigError("--resume: continues with the checkpoint's own settings; give only --device, "
                          "--iterations and --stop-at")
    if args.init_from:
        raise ConfigError("--init-from: starts a new run; a resumed one keeps its own networks")


def resumed_runner(args: argparse.Namespace, lead: bool, folder: contextlib.ExitStack) -> "Runner":
    """The runner of `--resume`'s run with its checkpoint loaded (extended to `--iterations`, on
    `--device`), its folder locked by rank 0 in `folder`."""
    from .train_config import config_from_dict, recorded_schedule
    check_resume_options(args)
    path = find_checkpoint(args.resume)
    state = load_checkpoint(path)
    cfg, run_info = config_from_dict(state["config"]), dict(state["run_info"])
    run_info["schedule"] = recorded_schedule(run_info, cfg)
    if args.iterations is not None:
        cfg = extend(cfg, args.iterations, int(state["iteration"]))
        run_info["schedule"].append([int(state["iteration"]), args.iterations])
    run_info["device"] = args.device or run_info["device"]
    if lead:
        folder.enter_context(RunFolderLock(path.parent.parent))
    runner = build_runner(cfg, run_info, path.parent.parent)
    runner.resume(path)
    return runner


def new_run_config(args: argparse.Namespace) -> "TrainConfig":
    """The config of a new run: the preset (`--preset`, default DEFAULT_PRESET: `args.preset` is set
    to it) with `--set`, the shorthands and `--algo` over it, validated."""
    from .train_config import load_preset
    args.preset = args.preset or DEFAULT_PRESET
    if args.iterations is not None:
        raise ConfigError(f"--iterations: extends a resumed run; for a new one use "
                          f"--set <algorithm>.iterations={args.iterations}")
    cfg = apply_overrides(load_preset(args.preset), parse_assignments(args.set))
    cfg = apply_overrides(cfg, shorthand_overrides(args))
    if args.algo:
        cfg.algorithm = args.algo
    cfg.validate()
    return cfg


def new_runner(args: argparse.Namespace, ranks: "Ranks", lead: bool, folder: contextlib.ExitStack) -> "Runner":
    """The runner of a new run (its motion checked, its networks started as `start_networks` says),
    its folder locked by rank 0 in `folder` and given the run's config.yaml."""
    cfg = new_run_config(args)
    if not args.no_motion_check and lead:
        print(f"bcg-train: {checked_motion(args.motion)}", file=sys.stderr)
    run_info = {"motion": args.motion, "device": args.device or "cpu", "preset": args.preset,
                "schedule": [[0, cfg.iterations()]]}
    run_dir = ranks.from_first(args.run_dir or default_run_dir(cfg, run_info))
    run_info["run_name"] = run_dir.name        # its checkpoints name their run wherever they are copied
    if lead:
        folder.enter_context(RunFolderLock(run_dir))
    runner = build_runner(cfg, run_info, run_dir)
    start_networks(runner, args.init_from, lead)
    if lead:
        write_run_config(runner)
    return runner


def start_networks(runner: "Runner", init_from: Optional[Path], lead: bool) -> None:
    """Start a new run's networks from `--init-from`, else from `runner.init_from` of its config (none:
    fresh networks), and record where in its run_info; rank 0 warns of what starting SHAC from a
    policy file needs."""
    from .policy_weights import policy_start_warnings
    cfg = runner.cfg
    start = init_from or start_file(cfg.runner.init_from)
    if not start:
        return
    runner.run_info["init_from"] = {**runner.init_from(find_checkpoint(start)), "from_config": not init_from}
    if lead and cfg.algorithm == "shac" and "policy" in runner.run_info["init_from"]:
        for warning in policy_start_warnings(cfg.shac.actor_warmup_iterations, cfg.shac.init_action_std):
            print(f"bcg-train: warning: starting from a policy file: {warning}", file=sys.stderr)


def write_run_config(runner: "Runner") -> None:
    """RUN/config.yaml: the run's information and its full config."""
    runner.run_dir.mkdir(parents=True, exist_ok=True)
    saved = {"run": runner.run_info, "config": runner.cfg.to_dict()}
    write_text_atomic(runner.run_dir / "config.yaml", yaml.safe_dump(saved, sort_keys=False))


def check_stop_at(stop_at: Optional[int], runner: "Runner") -> None:
    """ConfigError unless `--stop-at` (when given) is after the runner's iteration and within its run."""
    if stop_at is not None and not runner.iteration < stop_at <= runner.algorithm.iterations:
        raise ConfigError(f"--stop-at: {stop_at} is not after iteration {runner.iteration} and within the "
                          f"run's {runner.algorithm.iterations}")


def run_training(runner: "Runner", stop_at: Optional[int], world_size: int, lead: bool) -> int:
    """Train until the run's end or `stop_at`; rank 0 then ships the screened pick, if the run screened."""
    if lead:
        print(f"bcg-train: {runner.cfg.algorithm} in {runner.run_dir} ({runner.algorithm.iterations} iterations, "
              f"{world_size} x {runner.algorithm.env.num_envs} envs)", file=sys.stderr)
    last = runner.train(stop_at=stop_at)
    if last is not None:
        print(f"bcg-train: checkpoint {last}\n  export: bcg-export {last} -o policy.onnx", file=sys.stderr)
    if lead and runner.screened:
        ship_pick(runner.run_dir)
    return 0


def checked_motion(motion: str) -> str:
    """What `python -m bcg_train.motion check` finds in a motion file or named segment, in one line
    (duration, root speed, flights); MotionFileError naming every failure (a wrong frame rate, a
    floating or tilted clip, spikes, joint limits), so that no run trains on a clip that is not what
    it claims. Built-in motions pass unchecked."""
    from bcg.motion import load_motion
    from bcg.robot import RobotDescription

    from .motion.checks import check_file_motion
    from .motion.kinematics import RobotKinematics
    from .motion.library import BUILTIN_MOTIONS, motion_source
    if motion in BUILTIN_MOTIONS:
        return f"motion {motion}: built in"
    report = check_file_motion(motion, load_motion(motion_source(motion)), RobotKinematics(RobotDescription.load()))
    failures = report.failures()
    if failures:
        raise MotionFileError(f"motion {motion} fails its check: {'; '.join(failures)} (python -m bcg_train.motion "
                              f"check {motion}; --no-motion-check trains on it anyway)")
    return (f"motion {motion}: {report.duration_s:.1f} s, root {report.mean_root_speed:.2f} m/s mean "
            f"({report.max_root_speed:.2f} max), {report.flight_phases} flights (longest "
            f"{report.longest_flight_s:.2f} s), max joint speed {report.max_joint_speed:.1f} rad/s: checked")


def start_file(path: str) -> Optional[Path]:
    """`runner.init_from` as a file: as given when it exists (absolute, or relative to the current
    folder), else relative to the workspace (the folder holding config/); None when empty.
    ConfigError in the config grammar's shape ("runner.init_from=VALUE: ...; expected ...") naming the
    places looked at when it is nowhere."""
    if not path:
        return None
    candidates = [Path(path)] if Path(path).is_absolute() else [Path(path), config_dir().parent / path]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    looked_at = ", ".join(map(str, candidates))
    raise config_error("runner.init_from", path, f"no such file or folder (looked at {looked_at})",
                       "a policy file, checkpoint or run folder that exists, or '' (fresh networks)")


def ship_pick(run_dir: Path) -> None:
    """Export the screened pick of `run_dir` with its provenance to RUN/policy/ (`bcg-ship`'s name), or
    say that every screened checkpoint fell."""
    from .background_screen import read_screen
    from .evaluation.ship import ship
    report = read_screen(run_dir) or {}
    best = report.get("pick")
    if best is None:
        print(f"bcg-train: no screened checkpoint stood in MuJoCo from both starts ({run_dir}/screen/screen.md)",
              file=sys.stderr)
        return
    onnx_path, side = ship(run_dir / CHECKPOINT_DIR / checkpoint_name(int(best["iteration"])), run_dir / PICK_DIR)
    print(f"bcg-train: the pick, iteration {best['iteration']} (MuJoCo: 0 falls from both starts, "
          f"{best['tracking_cm']:.1f} cm world tracking, {best['tracking_root_xy_cm']:.1f} cm without the drift): "
          f"{onnx_path} ({side.name}: its provenance)", file=sys.stderr)
