"""The training loop around an algorithm (SHAC or PPO): checkpoints, exact resume, logs, Ctrl-C.

A checkpoint holds everything the next iteration depends on (networks, optimisers, normalisers,
ADD discriminator and replay buffer, the env's state, every random generator), so training resumed
from iteration k computes the same numbers as a run that was never interrupted. Ctrl-C lets the
current iteration finish, saves a checkpoint and returns; a second Ctrl-C aborts without saving.
In a data-parallel run (`torchrun`, see algo.data_parallel) every rank runs this loop in step with
the others: rank 0 writes the logs, curves and checkpoints (which hold every rank's state), and a
Ctrl-C on any rank stops all of them after the same iteration.
"""
import json
import math
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Protocol

import torch
from torch import nn

from bcg.contract import ObservationSpec

from . import curves
from .algo.data_parallel import Ranks
from .algo.phases import phase
from .background_screen import BackgroundScreen, protected_iterations, read_screen, screened_after_pick
from .checkpoint import (
    CHECKPOINT_DIR,
    CheckpointError,
    checkpoint_name,
    load_checkpoint,
    prune_checkpoints,
    save_atomic,
)
from .env_api import DiffEnv
from .garbage_collection import collector_for_training
from .policy_weights import read_policy_weights
from .train_config import ALGORITHMS, TrainConfig
from .train_log import ITERATION, MetricsLog, Progress

CURVES_DIR = "curves"


class Algorithm(Protocol):
    """What the runner drives: `iteration` advances training by one update of everything."""

    name: str
    env: DiffEnv
    ranks: Ranks
    iterations: int
    env_steps_per_iteration: int
    """Environment steps of all ranks together."""

    def iteration(self, it: int) -> Dict[str, float]: ...
    def policy(self) -> nn.Module: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> None: ...


def make_algorithm(env: DiffEnv, cfg: TrainConfig) -> Algorithm:
    """The configured algorithm on `env`, its networks initialised from `cfg.runner.seed`."""
    torch.manual_seed(cfg.runner.seed)
    return ALGORITHMS[cfg.algorithm].build(env, cfg)


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class StopRequest:
    """While active (main thread only), the first SIGINT sets `requested`; the second raises KeyboardInterrupt."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nCtrl-C: finishing this iteration, then saving a checkpoint (Ctrl-C again aborts without saving)",
              file=sys.stderr, flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def summary(row: Dict[str, float], screened: Dict[str, float]) -> str:
    """The few numbers the progress line shows; with `screened` (`background_screen`'s newest row) the
    time up and tracking in MuJoCo of the newest screened checkpoint."""
    keys = ("reward/total", "episode/length", "loss/actor", "loss/critic", "loss/surrogate", "add/neg_acc")
    line = " ".join(f"{k.split('/')[-1]} {row[k]:.3g}" for k in keys if k in row and math.isfinite(row[k]))
    if screened:
        line += (f" | MuJoCo @{screened['mujoco/iteration']:.0f}: up {screened['mujoco/time_up_s']:.1f} s, "
                 f"{screened['mujoco/tracking_cm']:.0f} cm")
    return line


class Runner:
    """Trains `algorithm` in `run_dir` (metrics.csv, tensorboard/, checkpoints/, curves/)."""

    def __init__(self, algorithm: Algorithm, cfg: TrainConfig, run_dir: Path, run_info: Dict[str, object]):
        self.algorithm, self.cfg, self.run_dir = algorithm, cfg, Path(run_dir)
        self.ranks = algorithm.ranks
        self.run_info = dict(run_info)
        """What rebuilt the env (motion, kappa, bundle, ...): stored so that a resume rebuilds the same."""
        self.iteration = 0
        self.wall_clock_s = 0.0
        self.screened: Dict[str, float] = {}
        """After `train` with `runner.screen_every`: the newest screened checkpoint's mujoco/* metrics
        (empty when nothing was screened)."""

    @property
    def writes(self) -> bool:
        """Whether this process writes the run's files (rank 0 of a data-parallel run)."""
        return self.ranks.rank == 0

    def resume(self, path: Path) -> None:
        """Continue from the checkpoint at `path` (a file or a run folder); every rank reads the file and
        takes its own part (the run must have as many ranks as the one that wrote it)."""
        state = load_checkpoint(path)
        if state["algorithm_name"] != self.algorithm.name:
            raise ValueError(f"checkpoint {path}: trained with {state['algorithm_name']}, not {self.algorithm.name}")
        if state["world_size"] != self.ranks.world_size:
            raise CheckpointError(f"checkpoint {path}: written by {state['world_size']} rank(s), resumed with "
                                  f"{self.ranks.world_size}; resume with --nproc_per_node {state['world_size']}")
        own = state if self.ranks.rank == 0 else state["other_ranks"][self.ranks.rank - 1]
        self.algorithm.load_state_dict(own["algorithm"])
        set_rng_state(own["rng"])
        self.iteration, self.wall_clock_s = int(state["iteration"]), float(state["wall_clock_s"])

    def init_from(self, path: Path) -> Dict[str, object]:
        """Start from the trained networks of another run's checkpoint at `path` (actor, critics,
        observation normaliser, ADD discriminator: `load_networks`), or of an exported policy file
        (`.onnx`: its actor and normaliser, new critics and discriminator), with this run's own optimisers,
        schedule and env, e.g. a policy that already balances, fine-tuned on a new motion. The two
        must share the action and ADD layout, and the checkpoint's observation terms must be this
        run's or its first ones (terms appended since start at zero weight); CheckpointError naming
        both otherwise. Returns what the run records of its start."""
        alg, env = self.algorithm, self.algorithm.env
        if not hasattr(alg, "load_networks"):
            raise CheckpointError(f"--init-from: {alg.name} cannot start from another run's networks")
        if Path(path).suffix == ".onnx":
            return self._init_from_policy(Path(path))
        state = load_checkpoint(path)
        if state["algorithm_name"] != alg.name:
            raise CheckpointError(f"checkpoint {path}: a {state['algorithm_name']} run, not {alg.name}")
        ours = env.policy_contract().observation.terms
        theirs = ObservationSpec.from_json(json.loads(state["contract"]["observation"]), state["dims"]["act"]).terms
        if (state["dims"]["act"], state["dims"]["add"]) != (env.act_dim, env.add_dim) or theirs != ours[:len(theirs)]:
            raise CheckpointError(f"checkpoint {path}: its action and ADD sizes {state['dims']} and observation "
                                  f"terms {[t.name for t in theirs]} are not this run's ({env.act_dim}, "
                                  f"{env.add_dim}) and {[t.name for t in ours]} or their first terms")
        alg.load_networks(state["algorithm"])
        info = state["run_info"]
        run = info.get("run_name", Path(path).parent.parent.name)      # older runs: the folder of RUN/checkpoints/
        return {"checkpoint": Path(path).name, "run": run, "motion": info["motion"],
                "iteration": int(state["iteration"]), "env_steps": state.get("env_steps")}

    def _init_from_policy(self, path: Path) -> Dict[str, object]:
        """`init_from` an exported policy: its actor and normaliser (`policy_weights`), new critics and
        discriminator; the same layout checks against its contract."""
        alg, env = self.algorithm, self.algorithm.env
        weights = read_policy_weights(path)
        ours, theirs = env.policy_contract().observation.terms, weights.contract.observation.terms
        if weights.contract.num_joints != env.act_dim or theirs != ours[:len(theirs)]:
            raise CheckpointError(f"policy {path}: its {weights.contract.num_joints} joints and observation terms "
                                  f"{[t.name for t in theirs]} are not this run's {env.act_dim} and "
                                  f"{[t.name for t in ours]} or their first terms")
        try:
            alg.load_policy(weights)
        except RuntimeError as e:          # torch's size mismatch, naming each tensor
            raise CheckpointError(f"policy {path}: its actor's layers do not fit this run's shac.actor_hidden "
                                  f"{list(self.cfg.shac.actor_hidden)}: {e}") from None
        return {"policy": path.name, "motion": weights.contract.motion}

    def checkpoint(self) -> Optional[dict]:
        """The checkpoint of this iteration on rank 0 (None on the others): the shared settings and rank 0's
        algorithm state and random generators, and under 'other_ranks' those of ranks 1, 2, ... (their
        environments, replay buffers and generators differ). Every rank must call it."""
        ranks = self.ranks.gather_to_first({"algorithm": self.algorithm.state_dict(), "rng": rng_state()})
        if ranks is None:
            return None
        env = self.algorithm.env
        return {"iteration": self.iteration, "wall_clock_s": self.wall_clock_s,
                "env_steps": self.iteration * self.algorithm.env_steps_per_iteration,
                "algorithm_name": self.algorithm.name, "config": self.cfg.to_dict(), "run_info": self.run_info,
                "dims": {"obs": env.obs_dim, "act": env.act_dim, "add": env.add_dim},
                "contract": env.policy_contract().to_metadata(), **ranks[0],
                "world_size": self.ranks.world_size, "other_ranks": ranks[1:]}

    def save(self) -> Optional[Path]:
        """Write this iteration's checkpoint (rank 0; every rank must call it); returns its path there."""
        state = self.checkpoint()
        if state is None:
            return None
        folder = self.run_dir / CHECKPOINT_DIR
        path = save_atomic(state, folder / checkpoint_name(self.iteration))
        keep = protected_iterations(read_screen(self.run_dir)) if self.cfg.runner.screen_every else set()
        prune_checkpoints(folder, self.cfg.runner.keep_checkpoints, keep)
        return path

    def _patience_spent(self, screen: Optional[BackgroundScreen]) -> bool:
        """Whether `runner.screen_patience` checkpoints screened after the pick have not beaten it (said
        once on the console); screen.json is read only when the screening has changed it (`screen.report`)."""
        patience = self.cfg.runner.screen_patience
        if screen is None or not patience:
            return False
        after = screened_after_pick(screen.report())
        if after is None or after < patience:
            return False
        print(f"\nbcg-train: stopping: {after} checkpoints screened after the pick have not beaten it "
              f"(runner.screen_patience {patience})", file=sys.stderr, flush=True)
        return True

    def train(self, stop_at: Optional[int] = None) -> Optional[Path]:
        """Run the remaining iterations, or stop after iteration `stop_at` as a stop request there would;
        returns the last checkpoint written (None if nothing ran, and on ranks other than 0, which write
        nothing)."""
        total = self.algorithm.iterations
        end = total if stop_at is None else min(stop_at, total)
        out = _RunOutputs.open(self, total)
        last = None
        try:
            with StopRequest() as stop, collector_for_training():
                stopping = False
                while self.iteration < end and not stopping:
                    row = self._iterate()
                    out.record(self.iteration, row)
                    stopping = self.ranks.any(stop.requested or self._patience_spent(out.screen))
                    # (every rank stops after the same iteration)
                    finished = self.iteration == end or stopping
                    if finished or self.iteration % self.cfg.runner.checkpoint_every == 0:
                        with phase("checkpoint"):
                            last = self.save()
                            out.flush()
                    if self.writes:
                        out.after_iteration(self.iteration, finished)
            if out.screen is not None and not stop.requested:      # (not after a Ctrl-C)
                with phase("screening"):
                    self.screened = out.finish_screening()
        finally:
            out.close()
        return last

    def _iterate(self) -> Dict[str, float]:
        """One iteration of the algorithm; its row of the metrics log."""
        t0 = time.monotonic()
        metrics = self.algorithm.iteration(self.iteration)
        self.wall_clock_s += time.monotonic() - t0
        self.iteration += 1
        return {ITERATION: self.iteration, "env_steps": self.iteration * self.algorithm.env_steps_per_iteration,
                "wall_clock_s": self.wall_clock_s, **metrics}


@dataclass
class _RunOutputs:
    """What a `Runner.train` call writes besides checkpoints: the metrics log and progress line, the
    learning curves and the MuJoCo screening beside training (the log and screening on rank 0 only)."""

    log: Optional[MetricsLog]
    progress: Progress
    drawing: curves.BackgroundCurves
    screen: Optional[BackgroundScreen]
    screen_every: int
    curves_every: int
    screened: Dict[str, float] = field(default_factory=dict)
    """The newest screened checkpoint's row."""

    @classmethod
    def open(cls, runner: "Runner", total: int) -> "_RunOutputs":
        every, writes = runner.cfg.runner.screen_every, runner.writes
        return cls(log=MetricsLog(runner.run_dir, runner.iteration) if writes else None,
                   progress=Progress(runner.algorithm.name, total, runner.iteration),
                   drawing=curves.BackgroundCurves(runner.run_dir, runner.run_dir / CURVES_DIR),
                   screen=BackgroundScreen(runner.run_dir, every, runner.cfg.runner.screen_seeds)
                   if every and writes else None,
                   screen_every=every, curves_every=runner.cfg.runner.curves_every)

    def record(self, iteration: int, row: Dict[str, float]) -> None:
        """Log iteration `iteration`'s `row`, with the screenings that finished since the last one."""
        if self.screen is not None:
            fresh = self.screen.poll()
            if fresh:
                self.screened = fresh[-1]
                row.update(self.screened)
                if self.log is not None:
                    self.log.write_screened(fresh)
        if self.log is not None:
            with phase("logging"):
                self.log.write(row)
                self.progress.update(iteration, summary(row, self.screened))

    def flush(self) -> None:
        if self.log is not None:
            self.log.flush()

    def after_iteration(self, iteration: int, finished: bool) -> None:
        """Start a screening of the checkpoint just written when one is due; draw the curves when due
        (and at the end)."""
        if self.screen is not None and not finished and iteration % self.screen_every == 0:
            self.screen.start()
        if finished:
            with phase("final curves"):
                self.drawing.finish()
        elif iteration % self.curves_every == 0:
            with phase("curves"):
                self.drawing.draw()

    def finish_screening(self) -> Dict[str, float]:
        """Screen what is left to screen (`screen` must be set); the newest screened row."""
        fresh = self.screen.finish()
        if self.log is not None:
            self.log.write_screened(fresh)
        return fresh[-1] if fresh else self.screened

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
        self.drawing.wait()
        if self.screen is not None:
            self.screen.wait()
