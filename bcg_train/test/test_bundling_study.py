"""The bundling study's pieces (bcg_train.bundling_study, run by bench/bundling_study.py): the 1-D bundled
estimate behaves as randomised smoothing says, and the G1 per-environment gradients are what a
direct per-environment computation gives."""
from dataclasses import fields, replace

import numpy as np
import pytest

from bcg_train.bundling_study import pointmass as pm
from bcg_train.bundling_study import scenarios, statistics, window


def test_pointmass_gradient_matches_finite_differences():
    z0 = np.array([0.35, 0.39, 0.395, 0.45])
    f, grad = pm.loss_and_gradient(z0, 300.0)
    eps = 1e-7
    fd = (pm.loss_and_gradient(z0 + eps, 300.0)[0] - pm.loss_and_gradient(z0 - eps, 300.0)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_pointmass_bundled_estimate_is_unbiased_for_the_smoothed_gradient_and_its_variance_falls_as_1_over_b():
    curves = pm.dense_curves(300.0, z_range=(0.3, 0.5), points=4001)
    np.testing.assert_allclose(curves.smoothed, curves.smoothed_from_f, atol=1e-2)
    rows = pm.bias_variance_rows(curves, repeats=400, rng=np.random.default_rng(0), branches=(1, 10))
    one, ten = rows
    assert ten["variance"] < one["variance"] / 5
    for r in rows:
        assert abs(r["bias"]) < 4 * r["bias_stderr"]
    # the smoothing moves the expectation far from the raw gradient; the estimate follows the smoothed one
    assert abs(ten["mean_estimate"] - ten["smoothed_grad"]) < 0.1 * abs(ten["raw_grad"] - ten["smoothed_grad"])


def test_zero_order_estimate_is_unbiased_and_wins_over_the_bundle_only_at_stiff_contact():
    """From the same samples: soft contact (kappa 50) gives a smooth loss, whose first-order estimate has
    far less variance than the zero-order one, and alpha follows it (near 1); at kappa 1000 the raw
    gradient is a spike and the zero-order estimate has several times less variance, and the alpha-order
    mix a smaller error across heights than the bundle's, smaller still with one alpha from the pooled
    variances. Both pure estimates are unbiased."""
    rng = np.random.default_rng(1)
    rows = {}
    for kappa in (50.0, 1000.0):
        curves = pm.dense_curves(kappa, z_range=(0.2, 0.6), points=6001)     # covers U(0.3, 0.5) + 5 sigma
        rows[kappa] = {r["estimator"]: r for r in pm.order_rows(curves, repeats=400, envs=400, rng=rng)}
        for name in ("first", "zero"):
            r = rows[kappa][name]
            assert abs(r["bias"]) < 4 * r["bias_stderr"], (kappa, r)
    soft, stiff = rows[50.0], rows[1000.0]
    assert soft["first"]["variance"] < soft["zero"]["variance"] / 20 and soft["alpha"]["median_alpha"] > 0.9
    assert stiff["zero"]["variance"] < stiff["first"]["variance"] / 3 and stiff["alpha"]["median_alpha"] < 0.5
    assert stiff["alpha pooled"]["mse_across"] < stiff["alpha"]["mse_across"] < stiff["first"]["mse_across"]
    with pytest.raises(ValueError, match="at least 2 branches"):
        pm.gradient_orders(np.zeros(3), 300.0, 1, rng)


@pytest.fixture(scope="module")
def two_env_jump():
    model = scenarios.g1_model()
    clip, landing = scenarios.jump_clip(model)
    return model, scenarios.jump_scenario(model, clip, landing, envs=2, seed=1)


def one_env(scenario: scenarios.Scenario, e: int) -> scenarios.Scenario:
    arrays = {f.name: getattr(scenario, f.name)[e:e + 1] for f in fields(scenario) if f.name != "name"}
    return replace(scenario, **arrays)


def test_per_env_gradients_equal_a_direct_per_env_computation(two_env_jump):
    model, scenario = two_env_jump
    both = window.StudyWindow(scenarios.study_config(300.0, None), scenario).run()
    both.check_finite("two envs")
    assert both.param_grads.shape == (2, 10333) and both.action_grads.shape == (2, scenarios.HORIZON, model.nj)
    for e in range(2):
        alone = window.StudyWindow(scenarios.study_config(300.0, None), one_env(scenario, e)).run()
        np.testing.assert_allclose(both.param_grads[e], alone.param_grads[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(both.action_grads[e], alone.action_grads[0], rtol=1e-9, atol=1e-12)
    var = statistics.sum_variance(both.param_grads)
    assert var > 0
    assert var == pytest.approx(0.5 * np.square(both.param_grads[0] - both.param_grads[1]).sum(), rel=1e-12)
    counts = statistics.resample_counts(2, 50, np.random.default_rng(0))
    direct = [statistics.sum_variance(np.repeat(both.param_grads, c.astype(int), axis=0)) for c in counts]
    np.testing.assert_allclose(statistics.bootstrap_sum_variance(both.param_grads, counts), direct,
                               rtol=1e-9, atol=1e-12)


def test_a_bundle_triggers_on_the_landing_and_gives_finite_gradients(two_env_jump):
    model, scenario = two_env_jump
    res = window.StudyWindow(scenarios.study_config(300.0, replace(scenarios.DEFAULT_BUNDLE, branches=3)),
                             scenario).run()
    res.check_finite("bundled")
    assert res.bundles >= 2 and res.branch_substeps > 0 and res.in_bundle.max() > 0


def test_direction_consistency_tells_parallel_from_independent_gradients():
    rng = np.random.default_rng(0)
    direction = rng.normal(size=500)
    same = statistics.direction_consistency(np.stack([direction * s for s in (0.5, 1.0, 3.0)]))
    assert same["cosine"] == pytest.approx(1.0) and same["signal_fraction"] == pytest.approx(1.0)
    assert same["norm_max"] == pytest.approx(3.0 * np.linalg.norm(direction))
    noise = statistics.direction_consistency(rng.normal(size=(16, 5000)))
    assert abs(noise["cosine"]) < 4 * noise["cosine_se"] + 0.01
    assert noise["signal_fraction"] == pytest.approx(1 / np.sqrt(16), rel=0.1)
    mixed = statistics.direction_consistency(direction + 0.5 * np.linalg.norm(direction) / np.sqrt(500)
                                             * rng.normal(size=(16, 500)))
    assert 0.6 < mixed["cosine"] < 0.95             # cos^2 ~ 1 / (1 + 0.25): about 0.8
    with pytest.raises(ValueError, match="at least 2"):
        statistics.direction_consistency(direction[None])
