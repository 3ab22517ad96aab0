"""Actor-gradient statistics against hand-computed numbers; SHAC logs them every iteration."""
import math

import pytest
import torch

from bcg_train.algo.gradient_stats import GradientStats

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def feed(stats, g, finite=True):
    g = torch.tensor(g, dtype=torch.float32)
    return {k: float(v) for k, v in stats.update([g[:1], g[1:]], g.norm(), torch.tensor(finite)).items()}


def test_statistics_of_three_windows_match_the_weighted_formulas():
    stats = GradientStats(num_params=2, window=2, clip=1.5, device=torch.device("cpu"))   # decay 1/2
    first = feed(stats, [1.0, 0.0])
    assert math.isnan(first["grad/actor_cosine"]) and math.isnan(first["grad/actor_window_variance"])
    assert first["grad/actor_clipped"] == 0.0 and first["grad/actor_clipped_fraction"] == 0.0
    second = feed(stats, [0.0, 2.0])
    assert second["grad/actor_cosine"] == pytest.approx(0.0)
    assert second["grad/actor_clipped"] == 1.0
    third = feed(stats, [3.0, 4.0])
    assert third["grad/actor_cosine"] == pytest.approx(8.0 / (2.0 * 5.0))
    # weights of the three windows, newest last: 1/8, 1/4, 1/2 (normalised by their sum 7/8)
    w = torch.tensor([1 / 8, 1 / 4, 1 / 2], dtype=torch.float64) / (7 / 8)
    g = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    mean = (w[:, None] * g).sum(0)
    variance = (w * (g - mean).square().sum(1)).sum()
    assert third["grad/actor_window_variance"] == pytest.approx(float(variance))
    assert third["grad/actor_window_snr"] == pytest.approx(float(mean.square().sum() / variance))
    assert third["grad/actor_clipped_fraction"] == pytest.approx(float(w[1] + w[2]))


def test_a_skipped_update_changes_nothing():
    stats = GradientStats(num_params=2, window=4, clip=1.0, device=torch.device("cpu"))
    feed(stats, [1.0, 1.0])
    feed(stats, [2.0, 0.5])
    before = {k: v.clone() for k, v in stats.state_dict().items()}
    skipped = feed(stats, [math.nan, 1.0], finite=False)
    assert math.isnan(skipped["grad/actor_cosine"]) and math.isnan(skipped["grad/actor_clipped"])
    assert all(torch.equal(before[k], v) for k, v in stats.state_dict().items())


def test_shac_logs_gradient_statistics_each_iteration(toy_env_class, tiny_config_factory):
    from bcg_train.runner import make_algorithm
    cfg = tiny_config_factory("shac", iterations=3)
    alg = make_algorithm(toy_env_class(num_envs=8), cfg)
    rows = [alg.iteration(i) for i in range(3)]
    for key in ("grad_norm/actor", "grad/actor_clipped", "grad/actor_clipped_fraction", "grad/actor_cosine",
                "grad/actor_window_variance", "grad/actor_window_snr"):
        assert all(key in r for r in rows), key
    assert all(math.isfinite(rows[-1][k]) for k in ("grad/actor_cosine", "grad/actor_window_variance"))
    assert -1.0 <= rows[-1]["grad/actor_cosine"] <= 1.0
    assert rows[0]["grad/actor_clipped"] == float(rows[0]["grad_norm/actor"] > cfg.shac.actor_grad_clip)
