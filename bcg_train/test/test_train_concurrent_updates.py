"""The updates that run beside the actor's backward pass (`concurrent_updates`): they run in another
thread, and training computes bit for bit what it computes with everything one after the other."""
import threading
import time

import pytest
import torch

from bcg_train.algo import concurrent_updates
from bcg_train.algo.phases import PhaseTimer
from bcg_train.runner import make_algorithm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def sequential(self, background, foreground):
    """`UpdateThread.run_beside` as the loop ran before: the foreground's work, then the background's."""
    front = foreground()
    return background(), front


def updates_first(self, background, foreground):
    """The other extreme of the race: the updates finish before the actor's backward pass starts (an
    update that wrote a tensor the actor's graph saved would make its backward fail)."""
    back = background()
    return back, foreground()


def train(algorithm, toy_env_class, tiny_config_factory, iterations=3):
    cfg = tiny_config_factory(algorithm)
    torch.manual_seed(cfg.runner.seed)                # PPO's action noise: torch's global generator
    alg = make_algorithm(toy_env_class(num_envs=8), cfg)
    metrics = [alg.iteration(it) for it in range(iterations)]
    return metrics, alg.state_dict()


def assert_bitwise_equal(a, b, where="state"):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_bitwise_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_bitwise_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b or (a != a and b != b), where   # NaN metrics compare equal to NaN


@pytest.mark.parametrize("order", [sequential, updates_first], ids=["actor first", "updates first"])
@pytest.mark.parametrize("algorithm", ["shac", "ppo"])
def test_training_is_bitwise_what_it_is_with_the_updates_one_after_the_other(algorithm, order, toy_env_class,
                                                                              tiny_config_factory, monkeypatch):
    concurrent = train(algorithm, toy_env_class, tiny_config_factory)
    monkeypatch.setattr(concurrent_updates.UpdateThread, "run_beside", order)
    one_after_the_other = train(algorithm, toy_env_class, tiny_config_factory)
    assert_bitwise_equal(concurrent, one_after_the_other)


@pytest.mark.parametrize("algorithm, beside, foreground",
                         [("shac", {"critic update", "discriminator update"},
                           {"rollout", "actor backward", "actor step", "target update", "obs normaliser"}),
                          ("ppo", {"discriminator update"}, {"rollout", "PPO update"})])
def test_the_updates_run_in_another_thread_than_the_loop(algorithm, beside, foreground, toy_env_class,
                                                         tiny_config_factory):
    alg = make_algorithm(toy_env_class(num_envs=8), tiny_config_factory(algorithm))
    with PhaseTimer() as timer:
        alg.iteration(0)
    assert timer.parallel == beside
    assert foreground <= set(timer.seconds) - timer.parallel


def test_run_beside_returns_both_results_and_raises_the_workers_error():
    updates = concurrent_updates.UpdateThread()
    main = threading.get_ident()
    back, front = updates.run_beside(lambda: threading.get_ident(), lambda: threading.get_ident())
    assert front == main and back != main
    with pytest.raises(ValueError, match="from the worker"):
        updates.run_beside(lambda: (_ for _ in ()).throw(ValueError("from the worker")), lambda: 1)


def test_a_failing_foreground_waits_for_the_background_before_raising():
    finished = []

    def slow():
        time.sleep(0.2)
        finished.append(True)

    with pytest.raises(RuntimeError, match="actor"):
        concurrent_updates.UpdateThread().run_beside(slow, lambda: (_ for _ in ()).throw(RuntimeError("actor")))
    assert finished == [True]
