"""Presets: the paper's defaults, size-only presets, and errors that name the key."""
import dataclasses
import json
from pathlib import Path

import pytest

from bcg_train.train_config import ConfigError, TrainConfig, apply_overrides, config_from_dict, load_preset

REPO = Path(__file__).resolve().parents[2]


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
    with pytest.raises(ConfigError, match=r"^shac\.horizon='long': a string; expected an integer$"):
        apply_overrides(TrainConfig(), {"shac": {"horizon": "long"}})
    with pytest.raises(ConfigError, match=r"^add\.hiden=\[8\]: unknown key; expected one of reward_scale, hidden, "):
        apply_overrides(TrainConfig(), {"add": {"hiden": [8]}})
    with pytest.raises(ConfigError, match=r"^shac\.betas=\[0\.9\]: 1 value; expected a list of 2 numbers"):
        apply_overrides(TrainConfig(), {"shac": {"betas": [0.9]}})
    with pytest.raises(ConfigError, match=r"^shac\.gamma=1\.5: too large; expected a number in \[0, 1\]$"):
        config_from_dict({"shac": {"gamma": 1.5}})
    with pytest.raises(ConfigError, match=r"^algorithm='sac': not one of the choices; expected one of 'shac', 'ppo'$"):
        config_from_dict({"algorithm": "sac"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("ppo:\n  actor_hidden: [64, 0]\n")
    with pytest.raises(ConfigError, match=r"^ppo\.actor_hidden=\[64, 0\]: item 1 is too small; "
                       r"expected a non-empty list of integers, each > 0 \(in .*bad\.yaml\)"):
        load_preset(bad)


def test_a_preset_extends_another(tmp_path):
    """finetune-cpu is transfer-cpu with its recipe on top; a loop of presets, or a base that does
    not exist, is refused by name."""
    fine, base = load_preset("finetune-cpu"), load_preset("transfer-cpu")
    assert (fine.shac.num_envs, fine.shac.critic_hidden, fine.add.hidden) == (32, (128, 128), (512, 256))
    assert fine.env.randomization == base.env.randomization and fine.env.randomization.enabled
    assert (fine.shac.actor_lr, fine.shac.actor_warmup_iterations, fine.env.root_velocity_sigma) == (5e-4, 50, 0.25)
    assert dataclasses.replace(fine.env, **{k: getattr(base.env, k) for k in (
        "reference_root_velocity", "root_velocity_reward", "root_velocity_sigma", "termination_body_error",
        "alive_reward", "leg_clearance_penalty", "rest_start_fraction", "rest_start_tilt_deg",
        "rest_start_tip_rate", "rest_start_joint_noise_rad")}) == base.env
    shipped = json.loads((REPO / "policies" / "shac_dance_k300.json").read_text())["config"]
    assert config_from_dict(shipped) == fine            # the recipe that trained the shipped dance, exactly
    (tmp_path / "a.yaml").write_text(f"extends: {tmp_path / 'b.yaml'}\nshac:\n  horizon: 8\n")
    (tmp_path / "b.yaml").write_text(f"extends: {tmp_path / 'a.yaml'}\n")
    with pytest.raises(ConfigError, match=r"^extends: presets extend each other in a loop: a -> b -> a"):
        load_preset(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text("extends: cpu-tiny\nshac:\n  horizon: 16\n")
    with pytest.raises(ConfigError, match=r"^preset: 'cpu-tiny' not found"):
        load_preset(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text("extends: cpu-small\nshac:\n  horizon: 16\n  iterations: 3\n")
    cfg = load_preset(tmp_path / "a.yaml")
    assert (cfg.shac.horizon, cfg.shac.iterations, cfg.shac.num_envs) == (8, 3, 32)   # a over b over cpu-small
    (tmp_path / "b.yaml").write_text("extends: cpu-small\nshac:\n  horizn: 16\n")
    with pytest.raises(ConfigError, match=r"^shac\.horizn=16: unknown key; expected one of .*b\.yaml"):
        load_preset(tmp_path / "a.yaml")


def test_config_round_trips_through_a_checkpoint_dict():
    cfg = apply_overrides(TrainConfig(), {"shac": {"actor_hidden": [64, 32]}, "runner": {"seed": 7}})
    assert config_from_dict(cfg.to_dict()) == cfg


def test_the_default_preset_is_the_recipe_for_a_new_motion(tmp_path, monkeypatch):
    """`bcg-train --motion CLIP` with no preset trains `track`: from the shipped walk policy (found from
    any folder), starts where episodes fail, a cost near each failure, MuJoCo screening beside it."""
    from bcg_train.cli import DEFAULT_PRESET, start_file
    cfg = load_preset(DEFAULT_PRESET)
    monkeypatch.chdir(tmp_path)
    assert start_file(cfg.runner.init_from) == REPO / "policies" / "shac_walk_k300.onnx"
    assert start_file("") is None
    assert cfg.env.adaptive_starts.enabled and cfg.env.failure_margin_penalty > 0 and cfg.runner.screen_every > 0
    assert cfg.env.randomization.enabled and cfg.env.rest_start_fraction > 0
    with pytest.raises(ConfigError, match=r"^runner\.init_from='policies/none\.onnx': no such file or folder "
                       r"\(looked at policies/none\.onnx, .+\); expected a policy file, checkpoint or run folder "
                       r"that exists, or '' \(fresh networks\)$"):
        start_file("policies/none.onnx")
    with pytest.raises(ConfigError, match=r"^runner\.screen_every=30: not a multiple of checkpoint_every \(50\); "
                       r"expected a multiple of checkpoint_every$"):
        apply_overrides(cfg, {"runner": {"screen_every": 30}}).validate()


def test_a_config_stored_before_the_bundle_experiments_moved_loads_them_at_their_place():
    """A checkpoint's or sidecar's config that holds the experiments (`BundleExperiments`) as keys of
    `env.sim.bundle` itself, where they were, reads them in `env.sim.bundle.experimental`; new keys win."""
    stored = TrainConfig().to_dict()
    bundle = stored["env"]["sim"]["bundle"]
    bundle.update(bundle.pop("experimental"), branch_clip=2.0, auto_sigma=True)
    assert "experimental" not in bundle and "nominal_forward" in bundle
    experiments = config_from_dict(stored).env.sim.bundle.experimental
    assert (experiments.branch_clip, experiments.auto_sigma, experiments.alpha_order) == (2.0, True, False)
    bundle["experimental"] = {"branch_clip": 3.0}
    assert config_from_dict(stored).env.sim.bundle.experimental.branch_clip == 3.0
    with pytest.raises(ConfigError, match=r"^env\.sim\.bundle\.branch_clip=2: unknown key"):
        apply_overrides(TrainConfig(), {"env": {"sim": {"bundle": {"branch_clip": 2}}}})   # a --set names its place
