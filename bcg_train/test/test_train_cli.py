"""bcg-train end to end on the toy env (the G1 env factory replaced), resume included."""
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from bcg_train import cli
from bcg_train.checkpoint import load_checkpoint
from bcg_train.evaluation.ship import train_commands
from bcg_train.train_config import config_from_dict

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_train_then_resume_from_the_command_line(toy_factory, tmp_path, capsys):
    run = tmp_path / "run"
    args = ["--preset", "cpu-smoke", "--motion", "jump", "--kappa", "300", "--no-bundle", "--run-dir", str(run),
            "--set", "shac.iterations=2", "--set", "shac.actor_hidden=[16]", "--set", "add.hidden=[16]",
            "--set", "runner.checkpoint_every=1"]
    assert cli.main(args) == 0
    assert toy_factory == [("jump", 300.0, False, "cpu")]
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["run"]["motion"] == "jump" and saved["config"]["shac"]["num_envs_without_bundle"] == 16
    assert "bcg-export" in capsys.readouterr().err
    (run / "checkpoints" / "iter_000002.pt").unlink()  # as if interrupted after iteration 1

    assert cli.main(["--resume", str(run)]) == 0
    assert toy_factory[-1] == ("jump", 300.0, False, "cpu")
    assert (run / "checkpoints" / "iter_000002.pt").is_file()
    assert len((run / "metrics.csv").read_text().strip().splitlines()) == 1 + 2

    assert cli.main(["--resume", str(run), "--iterations", "2"]) == cli.EXIT_USAGE   # nothing to extend
    assert "not more than the 2" in capsys.readouterr().err
    assert cli.main(["--resume", str(run), "--iterations", "3"]) == 0                # a longer run
    assert (run / "checkpoints" / "iter_000003.pt").is_file()
    assert len((run / "metrics.csv").read_text().strip().splitlines()) == 1 + 3

    assert cli.main(["--resume", str(run), "--iterations", "6", "--stop-at", "7"]) == cli.EXIT_USAGE
    assert "--stop-at: 7 is not after iteration 3 and within the run's 6" in capsys.readouterr().err
    assert cli.main(["--resume", str(run), "--iterations", "6", "--stop-at", "5"]) == 0   # as a Ctrl-C at 5
    assert (run / "checkpoints" / "iter_000005.pt").is_file() and not (run / "checkpoints" / "iter_000006.pt").exists()
    state = load_checkpoint(run / "checkpoints" / "iter_000005.pt")
    assert state["run_info"]["schedule"] == [[0, 2], [2, 3], [3, 6]]
    # bcg-ship's commands that train it again: the first part's plan, then each extension
    first, *resumes = train_commands(state["run_info"], state["config"], 5)
    assert first.startswith("bcg-train --preset cpu-smoke --motion jump --set shac.iterations=2 ")
    assert "--set env.sim.bundle.enabled=false" in first and first.endswith(" --run-dir '<run>'")
    assert resumes == ["bcg-train --resume '<run>' --iterations 3",
                       "bcg-train --resume '<run>' --iterations 6 --stop-at 5"]


def test_a_new_run_starts_from_another_runs_networks(toy_factory, tmp_path, capsys):
    small = ["--set", "shac.iterations=1", "--set", "shac.actor_hidden=[16]", "--set", "add.hidden=[16]"]
    assert cli.main(["--preset", "cpu-smoke", "--motion", "jump", "--run-dir", str(tmp_path / "a"), *small]) == 0
    base = tmp_path / "a" / "checkpoints" / "iter_000001.pt"
    assert cli.main(["--preset", "cpu-smoke", "--motion", "dance", "--run-dir", str(tmp_path / "b"),
                     "--init-from", str(tmp_path / "a"), *small]) == 0
    started = yaml.safe_load((tmp_path / "b" / "config.yaml").read_text())["run"]["init_from"]
    assert started == {"checkpoint": "iter_000001.pt", "run": "a", "motion": "jump", "iteration": 1,
                       "env_steps": load_checkpoint(base)["env_steps"], "from_config": False}
    copied = tmp_path / "kept" / "a_iter_1.pt"                 # a checkpoint copied out of its run still names it
    copied.parent.mkdir()
    shutil.copy(base, copied)
    assert cli.main(["--preset", "cpu-smoke", "--motion", "dance", "--run-dir", str(tmp_path / "b2"),
                     "--init-from", str(copied), *small]) == 0
    assert yaml.safe_load((tmp_path / "b2" / "config.yaml").read_text())["run"]["init_from"]["run"] == "a"
    state = load_checkpoint(tmp_path / "b" / "checkpoints" / "iter_000001.pt")
    assert "--init-from '<a>/checkpoints/iter_000001.pt'" in train_commands(state["run_info"], state["config"], 1)[0]
    # the networks are the checkpoint's, before any update of the new run
    cfg = config_from_dict(load_checkpoint(base)["config"])
    runner = cli.build_runner(cfg, {"motion": "dance", "device": "cpu"}, tmp_path / "c")
    runner.init_from(base)
    for key, value in load_checkpoint(base)["algorithm"]["actor"].items():
        assert torch.equal(runner.algorithm.actor.state_dict()[key], value)
    capsys.readouterr()
    assert cli.main(["--preset", "cpu-smoke", "--algo", "ppo", "--init-from", str(base)]) == cli.EXIT_USAGE
    assert "ppo cannot start from another run's networks" in capsys.readouterr().err
    assert cli.main(["--resume", str(tmp_path / "a"), "--init-from", str(base)]) == cli.EXIT_USAGE
    assert "a resumed one keeps its own networks" in capsys.readouterr().err


def test_a_new_run_starts_from_an_exported_policy(toy_factory, tmp_path, capsys):
    """--init-from POLICY.onnx: the file's actor and normaliser (the new run's deterministic policy
    computes what onnxruntime computes from the file), held for actor_warmup_iterations while the new
    critics learn; a file of other layers, or not written by bcg-export, is refused by name."""
    import numpy as np
    import onnxruntime as ort

    from bcg.contract import mlp_model, write_policy
    from bcg_train.export import export_checkpoint
    small = ["--set", "shac.actor_hidden=[16]", "--set", "add.hidden=[16]"]
    assert cli.main(["--preset", "cpu-smoke", "--motion", "jump", "--run-dir", str(tmp_path / "a"),
                     "--set", "shac.iterations=2", *small]) == 0
    policy, _ = export_checkpoint(tmp_path / "a", tmp_path / "a.onnx")
    assert cli.main(["--preset", "cpu-smoke", "--motion", "dance", "--run-dir", str(tmp_path / "b"),
                     "--set", "shac.iterations=2", "--set", "shac.actor_warmup_iterations=1", "--set",
                     "runner.checkpoint_every=1", "--init-from", str(policy), *small]) == 0
    started = yaml.safe_load((tmp_path / "b" / "config.yaml").read_text())["run"]["init_from"]
    assert started == {"policy": "a.onnx", "motion": "toy_circle", "from_config": False}    # the toy env's contract
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "shac.init_action_std is 1" in warnings[0]    # the warm-up was set
    state = load_checkpoint(tmp_path / "b" / "checkpoints" / "iter_000001.pt")
    assert "--init-from '<a.onnx>'" in train_commands(state["run_info"], state["config"], 1)[0]

    cfg = config_from_dict(state["config"])
    runner = cli.build_runner(cfg, {"motion": "dance", "device": "cpu"}, tmp_path / "c")
    runner.init_from(policy)
    obs = np.random.default_rng(0).normal(size=(64, runner.algorithm.env.obs_dim)).astype(np.float32)
    expected = ort.InferenceSession(str(policy)).run(None, {"obs": obs})[0]
    with torch.no_grad():
        got = runner.algorithm.policy()(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    held = runner.algorithm.actor.state_dict()
    for key, value in state["algorithm"]["actor"].items():       # iteration 1 held the actor
        if key.startswith("net."):
            assert torch.equal(held[key], value), key
    assert state["algorithm"]["actor"]["log_std"].equal(held["log_std"])

    capsys.readouterr()
    assert cli.main(["--preset", "cpu-smoke", "--motion", "dance", "--run-dir", str(tmp_path / "d"),
                     "--set", "add.hidden=[16]", "--init-from", str(policy)]) == cli.EXIT_USAGE
    assert f"policy {policy}: its actor's layers do not fit this run's" in capsys.readouterr().err
    contract = runner.algorithm.env.policy_contract()
    n = contract.num_joints
    foreign = write_policy(tmp_path / "foreign.onnx", mlp_model([(np.zeros((contract.observation.size, n)),
                                                                   np.zeros(n))]), contract)
    assert cli.main(["--preset", "cpu-smoke", "--motion", "dance", "--run-dir", str(tmp_path / "e"), *small,
                     "--init-from", str(foreign)]) == cli.EXIT_USAGE
    assert "not a graph written by bcg-export" in capsys.readouterr().err


def test_resume_refuses_new_settings(tmp_path, capsys):
    assert cli.main(["--resume", str(tmp_path), "--kappa", "50"]) == cli.EXIT_USAGE
    assert "checkpoint's own settings" in capsys.readouterr().err
    assert cli.main(["--preset", "cpu-smoke", "--iterations", "5"]) == cli.EXIT_USAGE
    assert "--set <algorithm>.iterations=5" in capsys.readouterr().err


def test_a_start_from_a_policy_file_warns_of_what_the_file_lacks():
    from bcg_train.policy_weights import policy_start_warnings
    both = policy_start_warnings(0, 1.0)
    assert len(both) == 2 and "actor_warmup_iterations is 0" in both[0] and "init_action_std is 1" in both[1]
    assert policy_start_warnings(200, 0.2) == []


def test_a_clip_that_fails_its_check_is_refused_before_training(tmp_path, capsys):
    """A real take read at twice its frame rate (the root falls faster than gravity) is refused by name
    before any run folder is made; a good window passes with its numbers."""
    import os

    from bcg.motion.segments import ENV_VAR
    folder = os.environ.get(ENV_VAR)
    if not folder or not (Path(folder) / "jumps1_subject1.csv").is_file():
        pytest.skip(f"the LAFAN1 G1 takes (${ENV_VAR}) are not here")
    run = tmp_path / "run"
    args = ["--motion", "jumps1_subject1.csv@5:20,fps=60", "--run-dir", str(run)]
    assert cli.main(args) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "fails its check: frame rate: the root falls faster than gravity" in err
    assert "--no-motion-check trains on it anyway" in err and not run.exists()
    assert cli.checked_motion("jumps1_subject1.csv@5:20").startswith("motion jumps1_subject1.csv@5:20: 15.0 s, root")
    assert cli.checked_motion("synthetic_jump") == "motion synthetic_jump: built in"
