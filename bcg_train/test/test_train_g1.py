"""Training on the real G1 imitation environment (tiny sizes, same code paths as the presets): SHAC's
actor loss falls on a fixed batch through the simulator with bundling, a run resumes exactly, PPO runs,
and the exported ONNX file carries the environment's contract."""
import csv
import os
import signal

import pytest
import torch

from bcg.contract import load_policy
from bcg_train.algo.shac import Shac
from bcg_train.cli import build_env
from bcg_train.export import export_checkpoint
from bcg_train.runner import Runner, make_algorithm
from bcg_train.train_config import TrainConfig, apply_overrides

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def g1_config(algorithm="shac", iterations=2):
    return apply_overrides(TrainConfig(), {
        "algorithm": algorithm,
        "shac": {"num_envs": 4, "horizon": 8, "iterations": iterations, "actor_hidden": [32], "critic_hidden": [32],
                 "critic_iterations": 2, "critic_minibatches": 2, "init_action_std": 0.3},
        "ppo": {"num_envs": 4, "steps_per_env": 8, "iterations": iterations, "actor_hidden": [32],
                "critic_hidden": [32], "learning_epochs": 1, "mini_batches": 2},
        "add": {"hidden": [32], "buffer_size": 256, "replay_samples": 16, "minibatches": 2, "epochs": 1},
        "runner": {"checkpoint_every": 1, "seed": 1},
        "env": {"episode_length_s": 2.0, "sim": {"bundle": {"branches": 3}}},
    })


def test_shac_actor_loss_falls_on_a_fixed_batch_through_the_simulator(fixed_batch_loss):
    cfg = g1_config()
    torch.manual_seed(0)
    env = build_env(cfg, "synthetic_run", "cpu")
    shac = Shac(env, cfg.shac, cfg.add, seed=0)
    shac.set_learning_rates(0)
    loss_on_fixed_batch = fixed_batch_loss(shac, env)

    losses = []
    for _ in range(6):
        loss = loss_on_fixed_batch()
        losses.append(loss.item())
        assert shac.update_actor(loss)["skipped/actor"] == 0.0
    losses.append(loss_on_fixed_batch().item())
    assert losses[-1] < losses[0] - 0.05 * abs(losses[0]), losses


def rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: v for k, v in r.items() if k != "wall_clock_s"} for r in csv.DictReader(f)]


def test_shac_run_with_bundling_resumes_exactly_and_exports(tmp_path):
    """Ctrl-C during iteration 2 saves a checkpoint; resuming from it gives the uninterrupted run's numbers
    (B chosen by auto_branches, which changes it after the first iteration)."""
    experiments = {"auto_branches": True, "branch_rse_target": 0.01}
    cfg = apply_overrides(g1_config(iterations=3), {"env": {"sim": {"bundle": {"experimental": experiments}}}})
    whole = tmp_path / "whole"
    Runner(make_algorithm(build_env(cfg, "synthetic_run", "cpu"), cfg), cfg, whole, {"motion": "synthetic_run"}).train()
    part = tmp_path / "part"
    env = build_env(cfg, "synthetic_run", "cpu")
    step, calls = env.step, []

    def interrupting_step(actions):
        calls.append(1)
        if len(calls) == cfg.shac.horizon + 3:
            os.kill(os.getpid(), signal.SIGINT)
        return step(actions)
    env.step = interrupting_step
    checkpoint = Runner(make_algorithm(env, cfg), cfg, part, {"motion": "synthetic_run"}).train()
    assert checkpoint.name == "iter_000002.pt"
    resumed = Runner(make_algorithm(build_env(cfg, "synthetic_run", "cpu"), cfg), cfg, part,
                     {"motion": "synthetic_run"})
    resumed.resume(checkpoint)
    last = resumed.train()
    assert rows(part) == rows(whole)
    assert float(rows(whole)[-1]["env/env_steps"]) == 3 * 4 * 8
    assert "env/branch_substeps" in rows(whole)[-1]
    assert [r["env/branches"] for r in rows(whole)][-1] != "3.0" and rows(whole)[-1]["env/branch_rse"] != "nan"

    onnx_path, error = export_checkpoint(last, tmp_path / "policy.onnx")
    assert error < 1e-4
    contract = load_policy(onnx_path).contract
    assert contract.motion == "synthetic_run" and contract.contact_stiffness == 300.0
    assert contract.observation.size == build_env(cfg, "synthetic_run", "cpu").obs_dim


def test_ppo_runs_on_the_g1_environment(tmp_path):
    cfg = apply_overrides(g1_config("ppo"), {"env": {"sim": {"bundle": {"enabled": False}}}})
    runner = Runner(make_algorithm(build_env(cfg, "synthetic_jump", "cpu"), cfg), cfg, tmp_path,
                    {"motion": "synthetic_jump"})
    runner.train()
    last = rows(tmp_path)[-1]
    assert float(last["env/env_steps"]) == 2 * 4 * 8
    assert all(last[k] not in ("", "nan") for k in ("reward/add", "reward/action_rate", "loss/value"))


@pytest.mark.parametrize("bundles", ["on the host", "on the device"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_shac_with_bundling_resumes_on_the_device(device, bundles, tmp_path):
    """A run stopped after iteration 2 and resumed from its checkpoint against the uninterrupted run,
    on `device`: bit-exact on the CPU; on CUDA within 1e-5 relative (the tolerance stated for GPU
    runs: float atomics may add in another order, and cuBLAS may pick other kernels). The bundles
    kept by the host's bundler or on the device (`bundle.on_device`, room for two of the four
    environments: its bundled steps captured as graphs)."""
    cfg = g1_config(iterations=3)
    if bundles == "on the device":
        cfg = apply_overrides(cfg, {"env": {"sim": {"bundle": {"on_device": True, "max_branch_rows": 6}}}})
    runs = {}
    for name in ("whole", "part"):
        runner = Runner(make_algorithm(build_env(cfg, "synthetic_run", device), cfg), cfg, tmp_path / name,
                        {"motion": "synthetic_run"})
        checkpoint = runner.train(stop_at=2 if name == "part" else None)
        runs[name] = checkpoint
    resumed = Runner(make_algorithm(build_env(cfg, "synthetic_run", device), cfg), cfg, tmp_path / "part",
                     {"motion": "synthetic_run"})
    resumed.resume(runs["part"])
    resumed.train()
    whole, part = rows(tmp_path / "whole"), rows(tmp_path / "part")
    assert [r["iteration"] for r in part] == [r["iteration"] for r in whole] == ["1", "2", "3"]
    assert float(whole[-1]["env/bundles"]) > 0
    if device == "cpu":
        assert part == whole
        return
    for a, b in zip(part, whole):
        for key in a:
            x, y = float(a[key] or "nan"), float(b[key] or "nan")
            assert x == pytest.approx(y, rel=1e-5, abs=1e-8, nan_ok=True), (a["iteration"], key, x, y)


def test_screen_runs_every_checkpoint_in_mujoco_keeps_its_rows_and_picks_one_that_stood(tmp_path, monkeypatch):
    """bcg-screen on a 2-iteration G1 run: a row per checkpoint from both starts, written to
    screen.json / screen.md; a second screen evaluates nothing again; a pruned checkpoint keeps its row;
    the pick is the standing row with the lowest world tracking error; a folder without checkpoints is
    refused by name."""
    import json

    from bcg_train.evaluation import screen as scr
    cfg = g1_config(iterations=2)
    run = tmp_path / "run"
    Runner(make_algorithm(build_env(cfg, "synthetic_run", "cpu"), cfg), cfg, run, {"motion": "synthetic_run"}).train()
    settings = scr.ScreenSettings(motion=None, seeds=1, duration_s=3.0)
    report = scr.screen(run, settings, tmp_path / "screen")
    assert [r["iteration"] for r in report["rows"]] == [1, 2]
    for r in report["rows"]:
        assert r["falls_reference"] in (0, 1) and r["falls_hold"] in (0, 1) and r["tracking_cm"] > 0
        assert 0 < r["time_up_s"] <= 3.0 and (r["time_up_s"] < 3.0) == bool(r["falls_reference"])
    assert json.loads((tmp_path / "screen" / "screen.json").read_text())["rows"] == report["rows"]
    assert "| 1" in (tmp_path / "screen" / "screen.md").read_text()
    assert (tmp_path / "screen" / "iter_000002.onnx").is_file()

    monkeypatch.setattr(scr, "evaluate", lambda *a, **k: pytest.fail("evaluated again"))
    assert scr.screen(run, settings, tmp_path / "screen")["rows"] == report["rows"]
    monkeypatch.undo()
    ckpt = run / "checkpoints" / "iter_000001.pt"
    os.utime(ckpt, ns=(ckpt.stat().st_atime_ns, ckpt.stat().st_mtime_ns + 1))    # written again: measured again
    measured = []
    monkeypatch.setattr(scr, "screen_row", lambda policy, iteration, *a, **k: measured.append(iteration) or
                        {**report["rows"][iteration - 1], "iteration": iteration})
    scr.screen(run, settings, tmp_path / "screen")
    assert measured == [1]
    ckpt.unlink()                                   # pruned by training: its row stays in the report
    assert [r["iteration"] for r in scr.screen(run, settings, tmp_path / "screen")["rows"]] == [1, 2]

    rows = [{"iteration": 1, "falls_reference": 0, "falls_hold": 0, "tracking_cm": 80.0},
            {"iteration": 2, "falls_reference": 0, "falls_hold": 1, "tracking_cm": 40.0},
            {"iteration": 3, "falls_reference": 0, "falls_hold": 0, "tracking_cm": 60.0}]
    assert scr.pick(rows)["iteration"] == 3 and scr.pick(rows[1:2]) is None
    assert scr.main([str(tmp_path / "empty"), "--seeds", "1"]) == 2
    with pytest.raises(scr.CheckpointError, match="no checkpoint iter_"):
        scr.run_checkpoints(tmp_path / "empty")
