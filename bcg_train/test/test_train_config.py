"""Presets: the paper's defaults, size-only presets, and errors that name the key."""
import dataclasses

import pytest

from bcg_train.train_config import ConfigError, TrainConfig, apply_overrides, config_from_dict, load_preset


def test_paper_preset_is_the_paper():
    cfg = load_preset("paper")
    assert cfg == TrainConfig()
    s = cfg.shac
    assert (s.num_envs, s.num_envs_without_bundle, s.horizon, s.iterations) == (64, 128, 32, 3000)
    assert (s.gamma, s.lam, s.actor_lr, s.critic_lr, s.final_lr, s.betas) == (0.99, 0.95, 5e-3, 2e-3, 1e-5, (0.7, 0.95))
    assert (s.critic_ensemble, s.critic_iterations, s.critic_minibatches, s.target_polyak) == (3, 16, 4, 0.995)
    assert ((s.actor_hidden, s.critic_hidden, s.actor_grad_clip, s.critic_grad_clip)
            == ((512, 256, 128), (256, 256), 1.0, 10.0))
    assert ((cfg.ppo.num_envs, cfg.ppo.steps_per_env, cfg.ppo.learning_rate, cfg.ppo.desired_kl)
            == (4096, 24, 1e-3, 0.01))
    a = cfg.add
    assert (a.reward_scale, a.learning_rate, a.logit_reg, a.grad_penalty) == (2.0, 2.5e-4, 0.01, 2.0)
    assert cfg.bundle and cfg.num_envs() == 64
    assert apply_overrides(cfg, {"env": {"sim": {"bundle": {"enabled": False}}}}).num_envs() == 128


@pytest.mark.parametrize("name", ["cpu-small", "cpu-smoke"])
def test_cpu_presets_change_sizes_only(name):
    """Counts, widths and intervals; never a code path or a learning-rule constant."""
    cfg, paper = load_preset(name), TrainConfig()
    size_fields = {"num_envs", "num_envs_without_bundle", "horizon", "iterations", "critic_iterations",
                   "critic_hidden", "hidden", "steps_per_env", "minibatches", "epochs", "buffer_size",
                   "replay_samples", "checkpoint_every", "curves_every", "torch_threads"}
    for section in ("shac", "ppo", "add", "runner"):
        a, b = getattr(cfg, section), getattr(paper, section)
        changed = {f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)}
        assert changed <= size_fields, (section, changed - size_fields)
    assert cfg.algorithm == paper.algorithm


def test_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"^shac\.horizon: expected an integer"):
        apply_overrides(TrainConfig(), {"shac": {"horizon": "long"}})
    with pytest.raises(ConfigError, match=r"^add\.hiden: unknown key"):
        apply_overrides(TrainConfig(), {"add": {"hiden": [8]}})
    with pytest.raises(ConfigError, match=r"^shac\.betas: expected 2 values"):
        apply_overrides(TrainConfig(), {"shac": {"betas": [0.9]}})
    with pytest.raises(ConfigError, match=r"^shac\.gamma: must be in \[0, 1\]"):
        config_from_dict({"shac": {"gamma": 1.5}})
    with pytest.raises(ConfigError, match=r"^algorithm: must be one of"):
        config_from_dict({"algorithm": "sac"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("ppo:\n  actor_hidden: [64, 0]\n")
    with pytest.raises(ConfigError, match=r"^ppo\.actor_hidden: must be a non-empty list .*bad\.yaml"):
        load_preset(bad)


def test_config_round_trips_through_a_checkpoint_dict():
    cfg = apply_overrides(TrainConfig(), {"shac": {"actor_hidden": [64, 32]}, "runner": {"seed": 7}})
    assert config_from_dict(cfg.to_dict()) == cfg
