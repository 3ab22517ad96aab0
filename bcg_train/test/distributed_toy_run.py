"""A tiny training run on the toy env for test_train_distributed (a script, not a test).

Under torchrun, each rank trains NUM_ENVS toy environments of its own (seeded with the seed + its
rank) through the runner, as `bcg-train` does. With `--side-by-side`, one process trains the toy
environments of ranks 0 and 1 stepped as one env of twice the size. The random numbers of one
process cannot match those of two ranks, so with `--fixed-noise` the policy noise is a fixed
function of the step and the environment, the replay samples are the newest deltas, and every
update uses one minibatch (its order then does not matter): both ways then compute the same
numbers, up to the order of floating-point sums. Each process saves its final policy to
RUN_DIR/policy_rank<R>.pt.

    torchrun --nproc_per_node 2 distributed_toy_run.py ALGORITHM RUN_DIR [--fixed-noise] [--iterations K]
    python distributed_toy_run.py ALGORITHM RUN_DIR --side-by-side [--fixed-noise] [--iterations K]
    torchrun --nproc_per_node 2 distributed_toy_run.py ALGORITHM RUN_DIR --resume CHECKPOINT
"""
import argparse
from pathlib import Path

import torch
from rsl_rl.modules.distribution import GaussianDistribution

from bcg_train.algo.add import DeltaReplayBuffer
from bcg_train.algo.networks import GaussianActor
from bcg_train.cli import start_distributed
from bcg_train.env_api import EnvStep
from bcg_train.runner import Runner, make_algorithm
from bcg_train.train_config import apply_overrides
from conftest import ToyTrackingEnv, tiny_config

NUM_ENVS = 4
"""Toy environments per rank."""


class SideBySide:
    """Several envs stepped as one: their environments concatenated in order (a `DiffEnv`); counters
    are the parts' means (as a data-parallel run logs them)."""

    def __init__(self, envs):
        self.envs = envs
        first = envs[0]
        self.num_envs = sum(e.num_envs for e in envs)
        self.obs_dim, self.act_dim, self.add_dim = first.obs_dim, first.act_dim, first.add_dim
        self.device = first.device

    def reset(self):
        return torch.cat([e.reset() for e in self.envs])

    def step(self, actions):
        parts = [e.step(a) for e, a in zip(self.envs, actions.split([e.num_envs for e in self.envs]))]

        def cat(name):
            return torch.cat([getattr(p, name) for p in parts])
        return EnvStep(obs=cat("obs"), reward_terms={k: torch.cat([p.reward_terms[k] for p in parts])
                                                     for k in parts[0].reward_terms},
                       add_sim=cat("add_sim"), add_ref=cat("add_ref"), terminated=cat("terminated"),
                       truncated=cat("truncated"), obs_before_reset=cat("obs_before_reset"),
                       counters={k: sum(p.counters[k] for p in parts) / len(parts) for k in parts[0].counters})

    def cut_graph(self):
        for e in self.envs:
            e.cut_graph()

    def policy_contract(self):
        return self.envs[0].policy_contract()

    def state_dict(self):
        return {"parts": [e.state_dict() for e in self.envs]}

    def load_state_dict(self, state):
        for e, s in zip(self.envs, state["parts"]):
            e.load_state_dict(s)


_draws = [0]


def noise(rows: int, width: int) -> torch.Tensor:
    """(rows, width) pseudo-noise in [-1, 1] for the next step: a fixed function of the step count and
    of each row's environment index within its rank (row % NUM_ENVS), smooth in neither (a function of
    the observations would amplify rounding differences from step to step)."""
    _draws[0] += 1
    env = (torch.arange(rows) % NUM_ENVS)[:, None].float()
    return torch.sin(1.7 * env + 0.9 * _draws[0] + 2.3 * torch.arange(width).float())


def deterministic_randomness() -> None:
    def actor_sample(self, obs, generator=None):
        mean = self.net(obs)
        return mean + self.log_std.exp() * noise(*mean.shape)

    def distribution_sample(self):
        mean = self._distribution.mean
        return mean + self._distribution.stddev * noise(*mean.shape)

    def newest_rows(self, n, generator):
        return self.data[(self._head - n + torch.arange(n, device=self.data.device)) % self.capacity]

    GaussianActor.sample = actor_sample
    GaussianDistribution.sample = distribution_sample
    DeltaReplayBuffer.sample = newest_rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("algorithm", choices=("shac", "ppo"))
    p.add_argument("run_dir", type=Path)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--side-by-side", action="store_true")
    p.add_argument("--resume", type=Path, help="continue from this checkpoint (in RUN_DIR)")
    p.add_argument("--fixed-noise", action="store_true", help="take the random numbers out (see the docstring)")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.fixed_noise:
        deterministic_randomness()
    ranks = start_distributed()
    cfg = apply_overrides(tiny_config(args.algorithm, iterations=args.iterations, checkpoint_every=2), {
        "shac": {"critic_minibatches": 1},
        "ppo": {"mini_batches": 1, "learning_epochs": 1},
        "add": {"minibatches": 1, "buffer_size": 4096}})
    if args.side_by_side:
        env = SideBySide([ToyTrackingEnv(num_envs=NUM_ENVS, seed=cfg.runner.seed + r) for r in range(2)])
    else:
        env = ToyTrackingEnv(num_envs=NUM_ENVS, seed=cfg.runner.seed + ranks.rank)
    runner = Runner(make_algorithm(env, cfg), cfg, args.run_dir, {"motion": "toy"})
    if args.resume:
        runner.resume(args.resume)
    runner.train()
    torch.save(runner.algorithm.policy().state_dict(), args.run_dir / f"policy_rank{ranks.rank}.pt")
    if ranks.world_size > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
