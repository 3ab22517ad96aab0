"""Data-parallel training (torchrun, gloo, 2 processes on the CPU) computes what one process with both
ranks' environments side by side computes: the same policy and the same logged metrics, to float32
summation-order tolerance (see distributed_toy_run.py for how the random numbers are taken out)."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bcg_train.checkpoint import load_checkpoint

SCRIPT = Path(__file__).with_name("distributed_toy_run.py")
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
"""Float32 sums over the same numbers in another order, carried through three Adam/SGD updates."""


def torchrun(*args):
    run("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", SCRIPT.name, *args)


def run(*args):
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, *args], cwd=SCRIPT.parent, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]


def metrics(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: float(v) if v else float("nan") for k, v in r.items() if k != "wall_clock_s"}
                for r in csv.DictReader(f)]


@pytest.mark.parametrize("algorithm", ["shac", "ppo"])
def test_two_ranks_train_as_one_process_with_both_ranks_environments(algorithm, tmp_path):
    ranks, one = tmp_path / "ranks", tmp_path / "one"
    torchrun(algorithm, str(ranks), "--fixed-noise")
    run(SCRIPT.name, algorithm, str(one), "--side-by-side", "--fixed-noise")

    rank0, rank1 = (torch.load(ranks / f"policy_rank{r}.pt") for r in (0, 1))
    single = torch.load(one / "policy_rank0.pt")
    for k in single:
        assert torch.equal(rank0[k], rank1[k]), k   # the ranks stay identical
        torch.testing.assert_close(rank0[k], single[k], **TOLERANCE, msg=k)

    two, side = metrics(ranks), metrics(one)
    assert [r["iteration"] for r in two] == [1.0, 2.0, 3.0]
    assert two[-1]["env_steps"] == side[-1]["env_steps"] == 3 * 8 * 8   # both ranks' steps
    for a, b in zip(two, side):
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(torch.tensor(a[k]), torch.tensor(b[k]), **TOLERANCE, equal_nan=True,
                                       msg=lambda m, k=k: f"{k}: {m}")

    assert len(list((ranks / "tensorboard").iterdir())) == 1   # rank 0 alone writes the run folder
    state = load_checkpoint(ranks)
    assert state["world_size"] == 2 and len(state["other_ranks"]) == 1
    assert not torch.equal(state["algorithm"]["context"]["env"]["pos"],
                           state["other_ranks"][0]["algorithm"]["context"]["env"]["pos"])


def test_two_ranks_resume_exactly_from_a_checkpoint_of_every_rank(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    torchrun("shac", str(straight))   # 3 iterations, a checkpoint after 2
    torchrun("shac", str(resumed), "--resume", str(straight / "checkpoints" / "iter_000002.pt"))
    for r in (0, 1):
        a, b = torch.load(straight / f"policy_rank{r}.pt"), torch.load(resumed / f"policy_rank{r}.pt")
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["iteration"] for r in metrics(resumed)] == [3.0]
    assert metrics(resumed)[0] == metrics(straight)[2]


def test_one_process_is_a_world_of_one():
    from bcg_train.algo.data_parallel import Ranks, Ratio, Total
    from bcg_train.algo.obs_normalizer import RunningObsNormalizer
    ranks = Ranks()
    assert (ranks.rank, ranks.world_size) == (0, 1)
    out = ranks.metrics_to_host({"a": 1.5, "b": torch.tensor(2.0), "c": Ratio(torch.tensor(6.0), torch.tensor(3.0)),
                                 "d": Ratio(torch.tensor(0.0), torch.tensor(0.0)), "e": Total(torch.tensor(4.0))},
                                torch.device("cpu"))
    assert out["a"] == 1.5 and out["b"] == 2.0 and out["c"] == 2.0 and out["e"] == 4.0 and out["d"] != out["d"]
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.tensor([1.0, 2.0])
    assert ranks.average_gradients([p], torch.tensor(3.0)) == 3.0 and torch.equal(p.grad, torch.tensor([1.0, 2.0]))

    norm = RunningObsNormalizer(3)
    a, b = torch.randn(50, 3, dtype=torch.float64), 2 + 3 * torch.randn(70, 3, dtype=torch.float64)
    norm.update(a, ranks)
    norm.update(torch.cat([b, torch.full((1, 3), float("nan"))]), ranks)   # the non-finite row is left out
    both = torch.cat([a, b])
    torch.testing.assert_close(norm.mean, both.mean(0))
    torch.testing.assert_close(norm.var, both.var(0, unbiased=False))
    assert norm.count == 120
