"""Export round trip: checkpoint -> ONNX with the contract; onnxruntime equals torch; the node's loader reads it."""
import numpy as np
import onnx
import pytest
import torch

from bcg.contract import load_policy
from bcg_train.export import export_checkpoint, main
from bcg_train.runner import Runner, make_algorithm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(params=["shac", "ppo"])
def trained_run(request, toy_env_class, tiny_config_factory, tmp_path):
    cfg = tiny_config_factory(request.param, iterations=2, checkpoint_every=2)
    cfg.runner.curves_every = 10
    runner = Runner(make_algorithm(toy_env_class(num_envs=8), cfg), cfg, tmp_path / "run", {"motion": "toy"})
    runner.train()
    return runner, tmp_path


def test_export_round_trip(trained_run):
    runner, tmp_path = trained_run
    out = tmp_path / "policy.onnx"
    path, error = export_checkpoint(tmp_path / "run", out)
    assert path == out and error <= 1e-5

    policy = load_policy(out)
    contract = policy.contract
    assert contract.joint_names == ("axis_0", "axis_1") and contract.motion == "toy_circle"
    assert contract.contact_stiffness == 50.0 and contract.control_period_s == pytest.approx(0.1)
    assert f"{runner.algorithm.name} iteration 2" in contract.description
    model = onnx.load(str(out))
    assert [i.name for i in model.graph.input] == ["obs"] and [o.name for o in model.graph.output] == ["actions"]

    torch_policy = runner.algorithm.policy()
    obs = np.random.default_rng(1).normal(size=(5, 12)).astype(np.float32)
    with torch.no_grad():
        expected = torch_policy(torch.from_numpy(obs)).numpy()
    got = np.stack([policy(o) for o in obs])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # the normaliser is inside the graph: raw observations far from zero give the trained outputs
    if runner.algorithm.name == "shac":
        assert runner.algorithm.obs_normalizer.count.item() > 0
        assert not torch.allclose(runner.algorithm.obs_normalizer.mean, torch.zeros(12, dtype=torch.float64))


def test_export_command_line(trained_run, capsys):
    runner, tmp_path = trained_run
    assert main([str(tmp_path / "run" / "checkpoints" / "iter_000002.pt"), "-o", str(tmp_path / "p.onnx")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main([str(tmp_path / "missing"), "-o", str(tmp_path / "q.onnx")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_a_policy_failing_its_check_does_not_replace_the_previous_file(trained_run, monkeypatch):
    from bcg_train import export
    runner, tmp_path = trained_run
    out = tmp_path / "policy.onnx"
    export_checkpoint(tmp_path / "run", out)
    before = out.read_bytes()
    monkeypatch.setattr(export, "onnxruntime_error", lambda *args: 1.0)    # as if onnxruntime disagreed
    with pytest.raises(export.ExportError, match="left as it was"):
        export_checkpoint(tmp_path / "run", out, description="a different file")
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx", "run"]
