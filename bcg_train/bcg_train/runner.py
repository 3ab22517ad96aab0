"""The training loop around an algorithm (SHAC or PPO): checkpoints, exact resume, logs, Ctrl-C.

A checkpoint holds everything the next iteration depends on (networks, optimisers, normalisers,
ADD discriminator and replay buffer, the env's state, every random generator), so training resumed
from iteration k computes the same numbers as a run that was never interrupted. Ctrl-C lets the
current iteration finish, saves a checkpoint and returns; a second Ctrl-C aborts without saving.
"""
import math
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Optional, Protocol

import torch
from torch import nn

from . import curves
from .checkpoint import checkpoint_name, load_checkpoint, prune_checkpoints, save_atomic
from .env_api import DiffEnv
from .train_config import ALGORITHMS, TrainConfig
from .algo.phases import phase
from .train_log import ITERATION, MetricsLog, Progress

CHECKPOINT_DIR = "checkpoints"
CURVES_DIR = "curves"


class Algorithm(Protocol):
    """What the runner drives: `iteration` advances training by one update of everything."""

    name: str
    env: DiffEnv
    iterations: int
    env_steps_per_iteration: int

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


def summary(row: Dict[str, float]) -> str:
    """The few numbers the progress line shows."""
    keys = ("reward/total", "episode/length", "loss/actor", "loss/critic", "loss/surrogate", "add/neg_acc")
    return " ".join(f"{k.split('/')[-1]} {row[k]:.3g}" for k in keys if k in row and math.isfinite(row[k]))


class Runner:
    """Trains `algorithm` in `run_dir` (metrics.csv, tensorboard/, checkpoints/, curves/)."""

    def __init__(self, algorithm: Algorithm, cfg: TrainConfig, run_dir: Path, run_info: Dict[str, object]):
        self.algorithm, self.cfg, self.run_dir = algorithm, cfg, Path(run_dir)
        self.run_info = dict(run_info)
        """What rebuilt the env (motion, kappa, bundle, ...): stored so that a resume rebuilds the same."""
        self.iteration = 0
        self.wall_clock_s = 0.0

    def resume(self, path: Path) -> None:
        """Continue from the checkpoint at `path` (a file or a run folder)."""
        state = load_checkpoint(path)
        if state["algorithm_name"] != self.algorithm.name:
            raise ValueError(f"checkpoint {path}: trained with {state['algorithm_name']}, not {self.algorithm.name}")
        self.algorithm.load_state_dict(state["algorithm"])
        set_rng_state(state["rng"])
        self.iteration, self.wall_clock_s = int(state["iteration"]), float(state["wall_clock_s"])

    def checkpoint(self) -> dict:
        env = self.algorithm.env
        return {"iteration": self.iteration, "wall_clock_s": self.wall_clock_s,
                "algorithm_name": self.algorithm.name, "config": self.cfg.to_dict(), "run_info": self.run_info,
                "dims": {"obs": env.obs_dim, "act": env.act_dim, "add": env.add_dim},
                "contract": env.policy_contract().to_metadata(),
                "algorithm": self.algorithm.state_dict(), "rng": rng_state()}

    def save(self) -> Path:
        folder = self.run_dir / CHECKPOINT_DIR
        path = save_atomic(self.checkpoint(), folder / checkpoint_name(self.iteration))
        prune_checkpoints(folder, self.cfg.runner.keep_checkpoints)
        return path

    def train(self) -> Optional[Path]:
        """Run the remaining iterations; returns the last checkpoint written (None if nothing ran)."""
        alg, total = self.algorithm, self.algorithm.iterations
        log = MetricsLog(self.run_dir, self.iteration)
        progress = Progress(alg.name, total, self.iteration)
        drawing = curves.BackgroundCurves(self.run_dir, self.run_dir / CURVES_DIR)
        last = None
        try:
            with StopRequest() as stop:
                while self.iteration < total and not stop.requested:
                    t0 = time.monotonic()
                    metrics = alg.iteration(self.iteration)
                    self.wall_clock_s += time.monotonic() - t0
                    self.iteration += 1
                    row = {ITERATION: self.iteration, "env_steps": self.iteration * alg.env_steps_per_iteration,
                           "wall_clock_s": self.wall_clock_s, **metrics}
                    with phase("logging"):
                        log.write(row)
                        progress.update(self.iteration, summary(row))
                    finished = self.iteration == total or stop.requested
                    if finished or self.iteration % self.cfg.runner.checkpoint_every == 0:
                        with phase("checkpoint"):
                            last = self.save()
                            log.flush()
                    if finished:
                        with phase("final curves"):
                            drawing.finish()
                    elif self.iteration % self.cfg.runner.curves_every == 0:
                        with phase("curves"):
                            drawing.draw()
        finally:
            log.close()
            drawing.wait()
        return last
