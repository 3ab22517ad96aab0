"""The ONNX policy contract: write/read round trip and every refusal, on real ONNX files."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest

from bcg.contract import (
    CheckedPolicies,
    ContractError,
    ObservationSpec,
    PolicyContract,
    PolicyFileError,
    checked_policies,
    load_policy,
    mlp_model,
    read_contract,
    robot_state_spec,
    stand_policy_path,
    write_policy,
)
from bcg.robot import RobotDescription


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


def contract_for(n=3, **changes):
    values = dict(joint_names=tuple(f"j{i}" for i in range(n)), kp=[10.0] * n, kd=[1.0] * n,
                  default_joint_pos=[0.1] * n, action_scale=[0.25] * n, observation=robot_state_spec(n),
                  control_period_s=0.02, contact_stiffness=300.0, motion="dance")
    values.update(changes)
    return PolicyContract(**values)


def linear(n_in, n_out, bias=0.0):
    return mlp_model([(np.zeros((n_in, n_out)), np.full(n_out, bias))])


def test_round_trip_keeps_every_field(tmp_path):
    c = contract_for(simulator={"substeps": 4, "limit_damping": 0.5})
    path = write_policy(tmp_path / "p.onnx", linear(c.observation.size, 3, 0.5), c)
    back = read_contract(path)
    assert back.joint_names == c.joint_names and back.motion == "dance" and back.contact_stiffness == 300.0
    assert back.simulator == {"substeps": 4, "limit_damping": 0.5}
    np.testing.assert_array_equal(back.kp, c.kp)
    assert back.observation == c.observation
    policy = load_policy(path)
    np.testing.assert_allclose(policy(np.ones(c.observation.size)), [0.5, 0.5, 0.5])


def test_stand_policy_outputs_zeros_with_robot_contract(robot, tmp_path):
    policy = load_policy(stand_policy_path(robot, tmp_path))
    assert policy.contract.joint_names == robot.joint_names
    np.testing.assert_array_equal(policy.contract.default_joint_pos, robot.default_q)
    assert "zero actions" in policy.contract.description
    assert not np.any(policy(np.random.default_rng(0).normal(size=policy.contract.observation.size)))


def test_missing_and_corrupt_files_are_refused(tmp_path):
    with pytest.raises(PolicyFileError, match="does not exist"):
        load_policy(tmp_path / "nope.onnx")
    (tmp_path / "bad.onnx").write_bytes(b"not a protobuf at all \x00\xff")
    with pytest.raises(PolicyFileError, match="not a valid ONNX model"):
        load_policy(tmp_path / "bad.onnx")


def _stamp(tmp_path, model, meta):
    for k, v in meta.items():
        model.metadata_props.add(key=k, value=v)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def test_file_without_contract_is_refused(tmp_path):
    path = _stamp(tmp_path, linear(9, 1), {})
    with pytest.raises(PolicyFileError, match="bcg_contract: metadata key missing"):
        load_policy(path)


@pytest.mark.parametrize("key, value, message", [
    ("joint_stiffness", "[1, 2]", "joint_stiffness: expected 3 values"),
    ("default_joint_pos", "[0, NaN, 0]", "default_joint_pos: contains NaN"),
    ("control_period_s", "0", "control_period_s"),
    ("observation", "[{\"name\": \"joint_pos\", \"size\": 4}]", "observation term 'joint_pos': size 4, expected 3"),
    ("observation", "[{\"name\": \"teleport\", \"size\": 1}]", "unknown term"),
    ("joint_names", "not json", "joint_names: not valid JSON"),
    ("simulator", "[4, 10]", "simulator: expected an object of setting name -> finite number"),
    ("simulator", "{\"substeps\": \"four\"}", "simulator: expected an object"),
])
def test_inconsistent_metadata_names_the_key(tmp_path, key, value, message):
    c = contract_for()
    meta = c.to_metadata()
    meta[key] = value
    path = _stamp(tmp_path, linear(c.observation.size, 3), meta)
    with pytest.raises(PolicyFileError, match=message.replace("[", r"\[")):
        load_policy(path)


def test_missing_key_is_named(tmp_path):
    c = contract_for()
    meta = c.to_metadata()
    del meta["action_scale"]
    with pytest.raises(PolicyFileError, match="action_scale: metadata key missing"):
        load_policy(_stamp(tmp_path, linear(c.observation.size, 3), meta))


def test_files_without_the_optional_keys_still_load(tmp_path):
    c = contract_for(simulator={"substeps": 4}, description="old")
    meta = c.to_metadata()
    del meta["simulator"], meta["description"]
    back = load_policy(_stamp(tmp_path, linear(c.observation.size, 3), meta)).contract
    assert back.simulator == {} and back.description == ""


@pytest.mark.parametrize("n_in, n_out, message", [(20, 3, "graph input"), (15, 4, "graph output")])
def test_graph_sizes_must_match_metadata(tmp_path, n_in, n_out, message):
    c = contract_for()   # 15 observations, 3 actions
    with pytest.raises(ContractError, match=message):
        write_policy(tmp_path / "w.onnx", linear(n_in, n_out), c)
    path = _stamp(tmp_path, linear(n_in, n_out), c.to_metadata())
    with pytest.raises(PolicyFileError, match=message):
        load_policy(path)


def test_contract_constructor_rejects_duplicates_and_bad_values():
    with pytest.raises(ContractError, match="duplicated"):
        contract_for(joint_names=("a", "a", "b"))
    with pytest.raises(ContractError, match="joint_damping: contains negative"):
        contract_for(kd=[1.0, -1.0, 1.0])
    assert json.loads(contract_for().to_metadata()["bcg_contract"]) == 1
    assert ObservationSpec.from_json(robot_state_spec(3).to_json(), 3) == robot_state_spec(3)


def refusal(path, checked=None) -> str:
    with pytest.raises(PolicyFileError) as refused:
        load_policy(path, checked=checked)
    return str(refused.value)


def test_a_file_that_passed_is_read_again_without_onnx(tmp_path):
    """The verdict: the same contract, and onnx (its import ~0.4 s of CPU) never loaded."""
    c = contract_for(simulator={"substeps": 4})
    path = write_policy(tmp_path / "p.onnx", linear(c.observation.size, 3, 0.5), c)
    checked = CheckedPolicies(tmp_path / "verdicts")
    assert load_policy(path, checked=checked).contract.to_metadata() == read_contract(path).to_metadata()
    assert len(list(checked.folder.iterdir())) == 1
    probe = textwrap.dedent(f"""
        import json, sys
        from bcg.contract import CheckedPolicies, load_policy
        policy = load_policy({str(path)!r}, checked=CheckedPolicies({str(checked.folder)!r}))
        print(json.dumps(["onnx" in sys.modules, policy.contract.to_metadata(), policy([1.0] * 15).tolist()]))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    onnx_loaded, metadata, action = json.loads(out.stdout.splitlines()[-1])
    assert not onnx_loaded and metadata == c.to_metadata() and action == [0.5, 0.5, 0.5]


def test_verdicts_refuse_what_the_full_check_refuses_and_remember_none_of_it(tmp_path):
    c = contract_for()
    bad = {"missing": tmp_path / "nope.onnx", "corrupt": tmp_path / "bad.onnx"}
    bad["corrupt"].write_bytes(b"not a protobuf at all \x00\xff")
    for name, meta in (("no_contract", {}), ("wrong_size", {**c.to_metadata(), "joint_stiffness": "[1, 2]"})):
        bad[name] = _stamp(tmp_path, linear(c.observation.size, 3), meta).rename(tmp_path / f"{name}.onnx")
    bad["graph"] = _stamp(tmp_path, linear(20, 3), c.to_metadata()).rename(tmp_path / "graph.onnx")
    twice = linear(c.observation.size, 3)
    twice.metadata_props.add(key="motion", value="other")            # a second contract value in one file
    bad["key_twice"] = _stamp(tmp_path, twice, c.to_metadata()).rename(tmp_path / "twice.onnx")
    checked = CheckedPolicies(tmp_path / "verdicts")
    for name, path in bad.items():
        plain = refusal(path)
        assert refusal(path, checked) == plain and refusal(path, checked) == plain, name
    assert "duplicate keys in metadata_props" in refusal(bad["key_twice"])
    assert not checked.folder.exists()


def test_a_changed_file_or_other_checks_find_no_verdict(tmp_path, monkeypatch):
    c = contract_for()
    path = write_policy(tmp_path / "p.onnx", linear(c.observation.size, 3), c)
    checked = CheckedPolicies(tmp_path / "verdicts")
    load_policy(path, checked=checked)
    data = path.read_bytes()
    assert checked.metadata(data) == c.to_metadata()
    model = onnx.load(str(path))
    model.metadata_props.add(key="motion", value="other")
    path.write_bytes(model.SerializeToString())                       # the same file, changed: refused again
    assert "duplicate keys in metadata_props" in refusal(path, checked)
    monkeypatch.setattr(checked_policies, "checks_identity", lambda: b"another onnx or contract code")
    assert checked.metadata(data) is None


def test_an_unusable_verdict_folder_or_file_only_means_the_full_check(tmp_path):
    c = contract_for()
    path = write_policy(tmp_path / "p.onnx", linear(c.observation.size, 3), c)
    (tmp_path / "a_file").write_text("")
    assert load_policy(path, checked=CheckedPolicies(tmp_path / "a_file")).contract.to_metadata() == c.to_metadata()
    checked = CheckedPolicies(tmp_path / "verdicts")
    checked.folder.mkdir()
    for text in ("{not json", json.dumps({"metadata": {"joint_names": 3}}), json.dumps([1])):
        checked.path(path.read_bytes()).write_text(text)
        assert checked.metadata(path.read_bytes()) is None
        assert load_policy(path, checked=checked).contract.to_metadata() == c.to_metadata()
        assert checked.metadata(path.read_bytes()) == c.to_metadata()
