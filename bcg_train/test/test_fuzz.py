"""Fuzzing (bench/fuzz.py, hypothesis) of what the suite reads from outside: motion CSV and npz files,
ONNX policy files, YAML configs and --set values, LowState and LowCmd on the wire. A few dozen cases
per target end in a result or the project's own error, with no crash, hang, NaN on the wire or
partial file; and the defects fuzzing found stay fixed."""
import io

import numpy as np
import onnx
import pytest

from bcg.config_check import ConfigError, apply_overrides, parse_assignments, read_yaml_mapping
from bcg.contract import PolicyFileError, load_policy, random_mlp, stand_contract, write_policy
from bcg.motion import MotionFileError, load_motion
from bcg.robot import RobotDescription
from bcg.wire import WireError, decode_lowcmd, decode_lowstate, encode_lowstate, new_lowstate
from bcg_train.train_config import TrainConfig


@pytest.fixture(scope="module")
def fuzz(bench_script):
    return bench_script("fuzz")


CASES = {"motion_csv": 40, "motion_npz": 40, "policy_onnx": 30, "train_config": 60, "lowstate": 30, "lowcmd": 60}


def test_every_target_ends_each_case_clearly(fuzz, capsys):
    """Each target: its cases end in results and clear errors, none in a crash, a hang, a NaN on the wire
    or a partial file; the bench's last line says so."""
    assert set(CASES) == set(fuzz.TARGETS)
    tallies = {}
    for name, cases in CASES.items():
        tallies.update(fuzz.fuzz([name], cases, case_limit_s=60.0, random_seed=1))
        last = capsys.readouterr().out.splitlines()[-1]
        assert last == f"fuzz_cases={tallies[name].cases} crashes=0 hangs=0 nan_on_wire=0 partial_files=0", last
    for name, t in tallies.items():
        assert t.cases >= CASES[name] // 2, name
        assert not (t.crashes or t.hangs or t.nan_on_wire or t.partial_files), (name, t)
        assert sum(t.errors.values()) > 0, (name, t)                       # broken inputs were met
        assert t.accepted + sum(t.rejected.values()) > 0, (name, t)         # and some went through
    assert tallies["lowcmd"].rejected["non_finite"] + tallies["lowcmd"].rejected["crc"] > 0


def test_a_npz_that_is_no_zip_is_a_motion_file_error(tmp_path):
    path = tmp_path / "take.npz"
    for data in (b"", b"PK\x03\x04 torn", b"not a zip at all"):
        path.write_bytes(data)
        with pytest.raises(MotionFileError, match="take.npz: cannot be read"):
            load_motion(path)
    buffer = io.BytesIO()
    np.savez(buffer, fps=30.0, joint_pos=np.zeros((3, 29)))
    path.write_bytes(buffer.getvalue()[:-40])                               # truncated
    with pytest.raises(MotionFileError, match="take.npz"):
        load_motion(path)


def test_a_policy_with_a_fixed_batch_is_refused_by_name(tmp_path):
    """A graph whose batch dimension is fixed at another size than 1: a PolicyFileError before
    onnxruntime runs it (it raised onnxruntime's own error on the first observation)."""
    robot = RobotDescription.load()
    contract = stand_contract(robot)
    path = write_policy(tmp_path / "p.onnx", random_mlp(contract.observation.size, [8], contract.num_joints), contract)
    model = onnx.load(str(path))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4
    path.write_bytes(model.SerializeToString())
    with pytest.raises(PolicyFileError, match=r"a batch of 4: the batch dimension must be symbolic or 1"):
        load_policy(path)


@pytest.mark.parametrize("items, message", [
    (["shac.iterations=["], r"^'shac.iterations=\[': not a YAML value \(.*\); expected KEY=VALUE with VALUE in "),
    (["shac=1", "shac.iterations=2"], "^'shac.iterations=2': shac is set as a value by another item; expected a "
                                      "section$"),
    (["shac.iterations=2", "shac=1"], "^'shac=1': shac is a section set by another item; expected a value$"),
    (["shac..iterations=2"], "^'shac..iterations=2': an empty key or key part; expected KEY=VALUE, e.g. "
                             "shac.iterations=50$"),
    (["=3"], "^'=3': an empty key or key part; expected KEY=VALUE"),
    (["shac.iterations"], "^'shac.iterations': no '='; expected KEY=VALUE"),
    (["runner.seed=2020-13-45"], "not a YAML value"),
])
def test_set_items_that_do_not_parse_are_config_errors(items, message):
    with pytest.raises(ConfigError, match=message):
        parse_assignments(items)
    assert parse_assignments(["shac.iterations=5", "shac.horizon=8", "add.hidden=[16]"]) == \
        {"shac": {"iterations": 5, "horizon": 8}, "add": {"hidden": [16]}}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10 ** 400])
def test_a_float_setting_must_be_finite(value):
    with pytest.raises(ConfigError, match=r"^shac\.actor_lr=.*: not finite; expected a finite number$"):
        apply_overrides(TrainConfig(), {"shac": {"actor_lr": value}})


@pytest.mark.parametrize("text, message", [("a: [1,", "not valid YAML"),
                                           ("- 1\n- 2", r"a list \[1, 2\]; expected a mapping of keys"),
                                           ("\tshac: 1", "not valid YAML")])
def test_a_yaml_file_that_is_no_mapping_is_a_config_error(tmp_path, text, message):
    path = tmp_path / "preset.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"preset.yaml: {message}"):
        read_yaml_mapping(path)


def test_truncated_or_foreign_samples_are_wire_errors():
    data = encode_lowstate(new_lowstate())
    with pytest.raises(WireError, match=r"LowState_: 100 bytes, expected 2092"):
        decode_lowstate(data[:100])
    with pytest.raises(WireError, match="unsupported encapsulation 0000"):
        decode_lowstate(b"\x00\x00" + data[2:])
    with pytest.raises(WireError, match="LowCmd_: 0 bytes"):
        decode_lowcmd(b"")
