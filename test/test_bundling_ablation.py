"""bench/bundling_ablation.py's arms and learning gains, without training (the quick mode trains eleven
arms, about 6 minutes on 2 cores, and is not part of the suite)."""
import math

import pytest


@pytest.fixture(scope="module")
def ablation(bench_script):
    return bench_script("bundling_ablation")


def test_each_arm_trains_with_its_own_contact_and_bundling(ablation):
    arms = {arm.name: arm for arm in ablation.ARMS}
    configs = {name: ablation.arm_config(arm, ablation.QUICK, seed=2) for name, arm in arms.items()}
    for name, cfg in configs.items():
        bundle = cfg.env.sim.bundle
        assert cfg.env.sim.kappa == arms[name].kappa and cfg.runner.seed == 2
        assert bundle.enabled == (arms[name].bundling != "none")
        impact = arms[name].bundling == "impact only"
        assert (bundle.onset_fraction, bundle.end_when_released) == ((0.25, True) if impact else (0.0, False))
        assert bundle.experimental.auto_sigma == (arms[name].bundling == "auto sigma")
        assert bundle.experimental.alpha_order == (arms[name].bundling == "alpha order")
    assert {arm.bundling for arm in ablation.ARMS} == set(ablation.BUNDLINGS)
    shac = configs["shac_k300_impact"]
    ppo = configs["ppo_k300"]
    steps = shac.shac.num_envs * shac.shac.horizon * shac.shac.iterations
    assert ppo.algorithm == "ppo" and abs(ppo.ppo.num_envs * ppo.ppo.steps_per_env * ppo.ppo.iterations - steps) \
        <= ppo.ppo.num_envs * ppo.ppo.steps_per_env / 2          # PPO at the SHAC arms' environment steps


def test_learning_gain_compares_each_bundling_with_none_at_the_same_kappa(ablation):
    def row(kappa, bundling, error, algorithm="shac"):
        return {"algorithm": algorithm, "kappa": kappa, "bundling": bundling, "final_add_error": error}
    rows = [row(300.0, "none", 0.30), row(300.0, "none", 0.32), row(300.0, "paper", 0.31),
            row(300.0, "impact only", 0.28), row(1000.0, "none", 0.40), row(1000.0, "paper", 0.50),
            row(300.0, "none", 9.0, algorithm="ppo")]
    assert ablation.gain(rows, 300.0) == pytest.approx(0.31 / 0.31)
    assert ablation.gain(rows, 300.0, "impact only") == pytest.approx(0.31 / 0.28)
    assert ablation.gain(rows, 1000.0) == pytest.approx(0.8)
    assert math.isnan(ablation.gain(rows, 1000.0, "impact only"))
    gains = ablation.gains(rows + [row(1000.0, "auto sigma", 0.32)])
    assert list(gains)[:2] == ["k300", "k1000"]                # the last line starts with the stiffness arms
    assert gains["k1000 auto sigma"] == pytest.approx(1.25) and math.isnan(gains["k300 auto sigma"])
