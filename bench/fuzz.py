"""Property-based fuzzing (hypothesis) of what the suite reads from outside.

    python bench/fuzz.py [--cases 10000] [--targets motion_csv,...] [--case-limit-s 5] [--seed 0]

Targets, each drawn from a valid input and broken in the ways inputs come broken:
- motion_csv: a LAFAN1 CSV of a built-in motion with truncated or extra columns, NaN / Inf / text
  fields, a header row, rows cut, the root quaternion in the other order, a wrong fps, windows past
  the end; loaded (`load_motion`), checked (`motion check`'s `check_file_motion`) and written back
  (`save_motion_csv`, atomic) when it loads;
- motion_npz: npz motions with wrong fps (0, NaN, arrays), shapes, dtypes, joint names, quaternion
  order, NaN, and random or truncated bytes;
- policy_onnx: the built-in stand policy's file as random, truncated or flipped bytes, with wrong input
  or output shapes or element types, and with missing or wrong contract metadata; loaded
  (`load_policy`) and, when it loads, run on a zero and a random observation;
- train_config: a YAML preset file of known and unknown keys with values of every type (NaN, Inf,
  huge, lists, text) and `--set KEY=VALUE` items (`bcg.config_check.parse_assignments`), applied and
  validated as bcg-train does;
- lowstate: LowState samples on the wire with random floats (NaN, Inf, huge), modes, mode_machine,
  ticks, temperatures and fault bits, bad CRC or truncated bytes, decoded and given to the policy
  node's controller (a few in a row, as it runs: checks, phases, the command plan) and its LowCmd
  composer: what it would send is encoded, decoded and checked for NaN;
- lowcmd: LowCmd samples likewise, offered to the MuJoCo bridge's command gate: what it accepts must
  be finite.

Every case must end in a result (accepted, or rejected and counted by reason) or in the project's
own error with a message (MotionFileError, PolicyFileError, ContractError, ConfigError, WireError,
JointMapError); any other exception is a crash, a case past --case-limit-s a hang, a non-finite value
the node would send (or the bridge apply) a NaN on the wire, and a temporary file left behind by a
writer (every writer is atomic) a partial file. Printed: each target's counts, the first crashes with
their input, and last `fuzz_cases=N crashes=C hangs=H nan_on_wire=W partial_files=P`. Exit 1 unless
all four are 0. The tests (bcg_train/test/test_fuzz.py) run the same targets on a few cases each.
"""
import argparse
import io
import json
import logging
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np
import onnx
import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException

from bcg.config_check import ConfigError, apply_overrides, parse_assignments, read_yaml_mapping
from bcg.contract import ContractError, Policy, PolicyFileError, load_policy, random_mlp, stand_contract, write_policy
from bcg.motion import LAFAN1_FPS, MotionFileError, MotionSource, load_motion, save_motion_csv
from bcg.robot import RobotDescription
from bcg.wire import (
    WireError,
    crc_ok,
    decode_lowcmd,
    decode_lowstate,
    encode_lowcmd,
    encode_lowstate,
    new_lowcmd,
    new_lowstate,
)
from bcg_policy_node.config import LOGGER_NAME as NODE_LOGGER
from bcg_policy_node.core.command_plan import LowCmdComposer, new_plan
from bcg_policy_node.core.controller import Controller
from bcg_policy_node.core.joint_map import JointMapError
from bcg_policy_node.core.safety import SafetyLimits
from bcg_policy_node.core.state_machine import StateMachine
from bcg_sim_bridge.command_gate import CommandGate
from bcg_train.motion.checks import check_file_motion
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.synthetic import synthesize_builtin
from bcg_train.train_config import TrainConfig

CLEAR_ERRORS = (MotionFileError, PolicyFileError, ContractError, ConfigError, WireError, JointMapError)
"""The project's errors: a case that ends in one, with a message, ended clearly."""
TEMPORARY_FILE = ".*.tmp"
"""What `bcg.atomic_file.write_atomic` names its temporary files (a partial file when left behind)."""


class CaseTimeout(BaseException):
    """A case ran past its time limit (BaseException: no `except Exception` of the code under test
    may turn it into a result)."""


class NanOnWire(AssertionError):
    """The node would send, or the bridge apply, a non-finite value."""


@dataclass
class Tally:
    """Outcomes of one target's cases."""

    cases: int = 0
    accepted: int = 0
    rejected: Counter = field(default_factory=Counter)
    """Rejections by reason (counted, not errors)."""
    errors: Counter = field(default_factory=Counter)
    """Clear errors by type."""
    crashes: List[str] = field(default_factory=list)
    hangs: int = 0
    nan_on_wire: List[str] = field(default_factory=list)
    partial_files: List[str] = field(default_factory=list)


# -- inputs ------------------------------------------------------------------------------------
WILD_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32),
                        st.sampled_from([0.0, -0.0, 1e30, -1e30, 3.4e38, 1e-45, np.nan, np.inf, -np.inf]))
NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2 ** 70, 2 ** 70))
FIELD_TEXT = st.one_of(NUMBERS.map(repr), st.sampled_from(["nan", "inf", "-inf", "", " ", "abc", "1e400", "0x10",
                                                          "1,2", "\"3\"", "1_000", "--1"]), st.text(max_size=6))
YAML_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


@dataclass
class Fixtures:
    """What every case starts from, built once: the robot, its kinematics, a built-in motion's CSV
    rows (3 s of synthetic_jump at 30 fps), a policy's file (the stand contract) and the policy
    loaded, the default training config's dotted keys."""

    robot: RobotDescription
    kinematics: RobotKinematics
    csv_rows: List[List[str]]
    policy_bytes: bytes
    policy: Policy
    config_keys: List[str]

    @classmethod
    def build(cls, folder: Path) -> "Fixtures":
        robot = RobotDescription.load()
        kinematics = RobotKinematics(robot)
        motion = synthesize_builtin("synthetic_jump", kinematics, duration_s=3.0).motion
        rows = [line.split(",") for line in save_motion_csv(motion, folder / "jump.csv").read_text().splitlines()]
        contract = stand_contract(robot)
        policy = write_policy(folder / "stand.onnx", random_mlp(contract.observation.size, [16], contract.num_joints),
                              contract)
        keys = [key for key, _ in _dotted(TrainConfig().to_dict())]
        return cls(robot, kinematics, rows, policy.read_bytes(), load_policy(policy), keys)


def _dotted(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _dotted(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


# -- targets: each takes (fixtures, draw, folder) and returns None (accepted) or a rejection reason --
def motion_csv(fx: Fixtures, draw, folder: Path) -> Optional[str]:
    rows = [list(r) for r in fx.csv_rows]
    first = draw(st.integers(0, len(rows) - 1))
    rows = rows[first:first + draw(st.integers(0, len(rows)))]
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["field", "truncate", "extra", "header", "swap_quat", "blank", "scale"]))
        if not rows:
            break
        r = draw(st.integers(0, len(rows) - 1))
        if kind in ("field", "truncate") and not rows[r]:
            continue
        if kind == "field":
            rows[r][draw(st.integers(0, len(rows[r]) - 1))] = draw(FIELD_TEXT)
        elif kind == "truncate":
            rows[r] = rows[r][:draw(st.integers(0, len(rows[r]) - 1))]
        elif kind == "extra":
            rows[r].append(draw(FIELD_TEXT))
        elif kind == "header":
            rows.insert(0, ["root_x", "root_y", "root_z", "qx", "qy", "qz", "qw"] + ["j"] * 29)
        elif kind == "swap_quat":
            rows = [row[:3] + row[6:7] + row[3:6] + row[7:] if len(row) >= 7 else row for row in rows]
        elif kind == "blank":
            rows.insert(r, [""])
        else:
            factor = draw(WILD_FLOATS)
            rows = [[repr(float(v) * factor) if i < 3 and _number(v) else v for i, v in enumerate(row)]
                    for row in rows]
    path = folder / "motion.csv"
    path.write_text("\n".join(",".join(row) for row in rows) + draw(st.sampled_from(["", "\n", "\r\n"])))
    fps = draw(st.one_of(st.none(), st.sampled_from([60.0, 15.0]), WILD_FLOATS))
    return _load_and_check(fx, draw, path, fps)


def motion_npz(fx: Fixtures, draw, folder: Path) -> Optional[str]:
    """This suite's npz (or BeyondMimic's) of a few frames, broken in up to two ways."""
    path = folder / "motion.npz"
    breaks = draw(st.sets(st.sampled_from(["bytes", "truncate", "fps", "shape", "dtype", "value", "names", "quat",
                                           "missing", "root_frames", "joint_vel"]), max_size=2))
    if "bytes" in breaks:
        path.write_bytes(draw(st.binary(max_size=200)))
        return _load_and_check(fx, draw, path, None)
    frames = draw(st.integers(0, 12))
    names = list(fx.robot.joint_names)
    n = len(names) + (draw(st.sampled_from([-1, 1])) if "shape" in breaks else 0)
    joint_pos = np.tile(fx.robot.default_q[:min(n, len(names))], (frames, 1))
    joint_pos = np.pad(joint_pos, ((0, 0), (0, n - joint_pos.shape[1])))
    if "value" in breaks and joint_pos.size:
        joint_pos.flat[draw(st.integers(0, joint_pos.size - 1))] = draw(WILD_FLOATS)
    if "dtype" in breaks:
        with np.errstate(invalid="ignore", over="ignore"):
            joint_pos = joint_pos.astype(draw(st.sampled_from(["f4", "i4", "?", "U3", "c8"])))
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (frames, 1))
    if "quat" in breaks:
        quat = quat[:, [1, 2, 3, 0]]                                  # x y z w written where w x y z belongs
    fps = draw(st.one_of(WILD_FLOATS.map(np.float64), st.sampled_from([np.zeros(0), np.ones(2), "30"]))) \
        if "fps" in breaks else np.float64(draw(st.sampled_from([30.0, 50.0, 60.0])))
    root_frames = draw(st.integers(0, 12)) if "root_frames" in breaks else frames
    arrays = {"fps": fps, "joint_pos": joint_pos, "root_pos": np.tile([0.0, 0.0, 0.78], (root_frames, 1)),
              "root_quat": quat, "joint_names": np.array(names[:n] if n <= len(names) else names + ["extra_joint"])}
    if "names" in breaks:
        arrays["joint_names"] = np.array(draw(st.sampled_from([names[::-1], names[:-1] + [names[0]],
                                                               names[:-1] + ["bogus_joint"], []])))
    if "joint_vel" in breaks:
        arrays["joint_vel"] = np.zeros((frames, draw(st.sampled_from([n, n + 1]))))
    if "missing" in breaks:
        arrays.pop(draw(st.sampled_from(sorted(arrays))))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    data = buffer.getvalue()
    path.write_bytes(data[:draw(st.integers(0, len(data) - 1))] if "truncate" in breaks else data)
    order = draw(st.sampled_from([None, "sdk", "isaaclab"])) if "joint_names" not in arrays else None
    return _load_and_check(fx, draw, path, None, joint_order=order)


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _load_and_check(fx: Fixtures, draw, path: Path, fps, joint_order=None) -> Optional[str]:
    """Load `path` with a random window and the given options (as a spec string or fields), run
    `motion check` on it, and write it back when it is at 30 fps: round trip equal."""
    start, end = draw(st.one_of(st.none(), WILD_FLOATS)), draw(st.one_of(st.none(), WILD_FLOATS))
    if draw(st.booleans()):
        source = MotionSource(path, start_s=start, end_s=end, fps=fps, joint_order=joint_order)
    else:
        bounds = ["" if v is None else v for v in (start, end)]
        window = "" if start is None and end is None else f"@{bounds[0]}:{bounds[1]}"
        options = "".join(f",{k}={v}" for k, v in (("fps", fps), ("joint_order", joint_order)) if v is not None)
        source = f"{path}{window}{options}"
    motion = load_motion(source)
    report = check_file_motion(path.name, motion, fx.kinematics)
    failures = report.failures()
    if motion.fps == LAFAN1_FPS and set(fx.robot.joint_names) <= set(motion.joint_names):
        out = save_motion_csv(motion, path.with_name("written.csv"))
        again = load_motion(out)
        if not np.allclose(again.joint_pos, motion.joint_pos[:, motion.joint_index(again.joint_names)],
                           rtol=1e-9, atol=1e-9):
            raise AssertionError(f"{out}: written and read back, the joint angles differ")
    return _failure_kind(failures[0]) if failures else None


def _failure_kind(failure: str) -> str:
    """A `motion check` failure's kind, to count rejections by: the words before its colon, else
    its first words ('velocity spike(s)', 'joint sample(s)')."""
    head = failure.split(":")[0]
    return head if len(head) < 40 else " ".join(failure.split()[1:3])


def policy_onnx(fx: Fixtures, draw, folder: Path) -> Optional[str]:
    path = folder / "policy.onnx"
    kind = draw(st.sampled_from(["bytes", "truncate", "flip", "shape", "dtype", "metadata", "metadata", "intact"]))
    data = fx.policy_bytes
    if kind == "bytes":
        data = draw(st.binary(max_size=300))
    elif kind == "truncate":
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif kind == "flip":
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
    elif kind in ("shape", "dtype", "metadata"):
        model = onnx.load_from_string(data)
        value = draw(st.sampled_from([model.graph.input[0], model.graph.output[0]]))
        if kind == "shape":
            dim = value.type.tensor_type.shape.dim[draw(st.integers(0, 1))]
            dim.dim_value = draw(st.integers(0, 200))
        elif kind == "dtype":
            value.type.tensor_type.elem_type = draw(st.sampled_from([onnx.TensorProto.DOUBLE, onnx.TensorProto.INT64,
                                                                      onnx.TensorProto.FLOAT16]))
        else:
            props = model.metadata_props
            k = draw(st.integers(0, len(props) - 1))
            if draw(st.booleans()):
                del props[k]
            else:
                props[k].value = draw(st.one_of(st.text(max_size=20), YAML_VALUES.map(json.dumps),
                                                st.sampled_from(["NaN", "[NaN]", "[1e999]", "-1", "{}", "null"])))
        data = model.SerializeToString()
    path.write_bytes(data)
    policy = load_policy(path)
    for observation in (np.zeros(policy.contract.observation.size, np.float32),
                        np.asarray(draw(st.lists(WILD_FLOATS, min_size=policy.contract.observation.size,
                                                 max_size=policy.contract.observation.size)), np.float32)):
        action = policy(observation)
        if action.shape != (policy.contract.num_joints,):
            raise AssertionError(f"policy output of shape {action.shape}")
    return None


def train_config(fx: Fixtures, draw, folder: Path) -> Optional[str]:
    keys = st.one_of(st.sampled_from(fx.config_keys), st.text(min_size=1, max_size=12))
    preset: Dict = {}
    for key in draw(st.lists(keys, max_size=4)):
        node = preset
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {}) if isinstance(node.get(p, {}), dict) else {}
        node[leaf] = draw(YAML_VALUES)
    text = yaml.safe_dump(preset) if draw(st.booleans()) else draw(st.text(max_size=60))
    path = folder / "preset.yaml"
    path.write_text(text)
    cfg = apply_overrides(TrainConfig(), read_yaml_mapping(path))
    items = draw(st.lists(st.one_of(st.tuples(keys, st.one_of(FIELD_TEXT, YAML_VALUES.map(json.dumps)))
                                    .map("=".join), st.text(max_size=15)), max_size=4))
    cfg = apply_overrides(cfg, parse_assignments(items))
    cfg.validate()
    return None


def lowstate(fx: Fixtures, draw, folder: Path) -> Optional[str]:
    """A few LowStates in a row to the node's controller; each time what it would send, checked."""
    robot = fx.robot
    controller = Controller(fx.policy, robot, SafetyLimits(), StateMachine(autostart=True, ramp_duration_s=0.04,
                                                                           autostart_hold_s=0.02,
                                                                           blend_duration_s=0.04), damping_kd=3.0)
    composer, plan, now, reasons = LowCmdComposer(), new_plan(), 0.0, []
    for _ in range(draw(st.integers(1, 6))):
        state = _standing_state(robot)
        for _ in range(draw(st.integers(0, 3))):
            _fuzz_field(draw, state, ("imu_state", "motor_state", "mode_machine", "tick", "mode_pr"))
        data = bytearray(encode_lowstate(state))
        if draw(st.booleans()) and draw(st.booleans()):
            data[draw(st.integers(4, len(data) - 1))] ^= draw(st.integers(1, 255))     # bad CRC (or header)
        if draw(st.integers(0, 7)) == 0:
            data = data[:draw(st.integers(0, len(data) - 1))]
        received = decode_lowstate(bytes(data))
        now += draw(st.sampled_from([0.002, 0.02, 0.1]))
        if not crc_ok(received):
            reasons.append("crc")                      # the node's reader drops it (check_state_crc)
            continue
        controller.on_state(received, now)
        controller.tick(now)
        controller.policy_step(now)
        controller.write_plan(plan)
        if plan["active"]:
            if not composer.compose(plan, now):
                reasons.append("not composed")
                continue
            sent = decode_lowcmd(encode_lowcmd(composer.cmd))["motor_cmd"]
            for name in ("q", "dq", "tau", "kp", "kd"):
                if not np.isfinite(sent[name]).all():
                    raise NanOnWire(f"LowCmd {name} = {sent[name].tolist()} after LowState {received!r}")
    return "damping" if controller.machine.phase.value == "damping" else (reasons[-1] if reasons else None)


def lowcmd(fx: Fixtures, draw, folder: Path) -> Optional[str]:
    robot = fx.robot
    gate = CommandGate(robot, timeout_s=0.1, damping_kd=3.0)
    cmd = new_lowcmd()
    cmd["mode_machine"] = robot.mode_machine
    motors = cmd["motor_cmd"]
    motors["mode"][robot.motor_slots] = 1
    motors["q"][robot.motor_slots] = robot.default_q
    motors["kp"][robot.motor_slots], motors["kd"][robot.motor_slots] = robot.kp, robot.kd
    for _ in range(draw(st.integers(0, 3))):
        _fuzz_field(draw, cmd, ("motor_cmd", "mode_machine", "mode_pr"))
    data = bytearray(encode_lowcmd(cmd))
    if draw(st.booleans()) and draw(st.booleans()):
        data[draw(st.integers(4, len(data) - 1))] ^= draw(st.integers(1, 255))
    if draw(st.integers(0, 7)) == 0:
        data = data[:draw(st.integers(0, len(data) - 1))]
    reason = gate.offer(decode_lowcmd(bytes(data)), 0.0)
    command = gate.command(0.0)
    for name, values in vars(command).items():
        if isinstance(values, np.ndarray) and values.dtype.kind == "f" and not np.isfinite(values).all():
            raise NanOnWire(f"the bridge applies {name} = {values.tolist()}")
    return reason


def _standing_state(robot) -> np.void:
    state = new_lowstate()
    state["mode_machine"] = robot.mode_machine
    state["tick"] = 1
    state["imu_state"]["quaternion"] = [1.0, 0.0, 0.0, 0.0]
    state["motor_state"]["q"][robot.motor_slots] = robot.default_q
    state["motor_state"]["temperature"][:] = 40
    return state


def _fuzz_field(draw, record: np.void, top: tuple) -> None:
    """One random leaf of `record` under a member of `top` (one element of it when it is an array) set to
    a random value of its type: floats of every kind, integers over their whole range."""
    parent, name = record, draw(st.sampled_from(top))
    while parent[name].dtype.names:
        parent, name = parent[name], draw(st.sampled_from(parent[name].dtype.names))
    leaf = parent[name]
    base = leaf.dtype.base if leaf.dtype.subdtype else leaf.dtype
    if base.kind == "f":
        value = draw(WILD_FLOATS)
    else:
        info = np.iinfo(base)
        value = draw(st.one_of(st.integers(int(info.min), int(info.max)), st.sampled_from([0, 1, 4, 5, 6, 99])))
    with np.errstate(over="ignore", invalid="ignore"):
        if np.ndim(leaf):
            flat = leaf.reshape(-1)            # a view of the record's array
            flat[draw(st.integers(0, flat.size - 1))] = value
        else:
            parent[name] = value


TARGETS: Dict[str, Callable] = {f.__name__: f for f in (motion_csv, motion_npz, policy_onnx, train_config, lowstate,
                                                        lowcmd)}


# -- the harness -------------------------------------------------------------------------------
def _alarm(signum, frame):
    raise CaseTimeout()


def run_target(name: str, fx: Fixtures, cases: int, case_limit_s: float, random_seed: int, folder: Path) -> Tally:
    """`cases` hypothesis cases of target `name`, each under `case_limit_s` (SIGALRM), in `folder`."""
    target, tally = TARGETS[name], Tally()
    previous = signal.signal(signal.SIGALRM, _alarm)

    @seed(random_seed)
    @settings(max_examples=cases, database=None, deadline=None, phases=[Phase.generate], derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data):
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            case = Path(tmp)
            tally.cases += 1
            signal.setitimer(signal.ITIMER_REAL, case_limit_s)
            try:
                reason = target(fx, data.draw, case)
                signal.setitimer(signal.ITIMER_REAL, 0)
                if reason is None:
                    tally.accepted += 1
                else:
                    tally.rejected[reason] += 1
            except HypothesisException:      # the draw was refused (hypothesis's own control flow): no case
                signal.setitimer(signal.ITIMER_REAL, 0)
                tally.cases -= 1
                raise
            except CaseTimeout:
                tally.hangs += 1
            except NanOnWire as e:
                signal.setitimer(signal.ITIMER_REAL, 0)
                tally.nan_on_wire.append(str(e)[:300])
            except CLEAR_ERRORS as e:
                signal.setitimer(signal.ITIMER_REAL, 0)
                if str(e).strip():
                    tally.errors[type(e).__name__] += 1
                else:
                    tally.crashes.append(f"{type(e).__name__} without a message")
            except Exception as e:   # anything else is a crash, recorded with where it came from
                signal.setitimer(signal.ITIMER_REAL, 0)
                where = traceback.extract_tb(e.__traceback__)[-1]
                tally.crashes.append(f"{type(e).__name__}: {str(e)[:200]} at {Path(where.filename).name}:"
                                     f"{where.lineno}")
            left = sorted(p.name for p in case.rglob(TEMPORARY_FILE))
            if left:
                tally.partial_files.append(", ".join(left))

    try:
        one()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return tally


def fuzz(names: List[str], cases: int, case_limit_s: float = 5.0, random_seed: int = 0, out=None) -> Dict[str, Tally]:
    """Run the targets `names`, print each one's counts and the summary line (to `out`, else standard
    output); the tallies by target."""
    logging.getLogger(NODE_LOGGER).setLevel(logging.ERROR)     # a faulted LowState is logged at every case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fx = Fixtures.build(folder)
        tallies = {}
        for name in names:
            start = time.perf_counter()
            t = tallies[name] = run_target(name, fx, cases, case_limit_s, random_seed, folder)
            print(f"{name:13s} cases={t.cases} accepted={t.accepted} rejected={sum(t.rejected.values())} "
                  f"{dict(t.rejected.most_common(4))} errors={dict(t.errors)} crashes={len(t.crashes)} hangs={t.hangs} "
                  f"nan_on_wire={len(t.nan_on_wire)} partial_files={len(t.partial_files)} "
                  f"({time.perf_counter() - start:.0f} s)", file=out)
            for problem in (t.crashes + t.nan_on_wire + t.partial_files)[:5]:
                print(f"  {problem}", file=out)
    total = {"fuzz_cases": sum(t.cases for t in tallies.values()),
             "crashes": sum(len(t.crashes) for t in tallies.values()), "hangs": sum(t.hangs for t in tallies.values()),
             "nan_on_wire": sum(len(t.nan_on_wire) for t in tallies.values()),
             "partial_files": sum(len(t.partial_files) for t in tallies.values())}
    print(" ".join(f"{k}={v}" for k, v in total.items()), file=out)
    return tallies


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", type=int, default=10000, help="cases per target (default 10000)")
    p.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    p.add_argument("--case-limit-s", type=float, default=5.0, help="seconds a case may take before it is a hang")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    names = args.targets.split(",")
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        p.error(f"unknown target(s) {unknown}; known: {', '.join(TARGETS)}")
    tallies = fuzz(names, args.cases, args.case_limit_s, args.seed)
    bad = any(t.crashes or t.hangs or t.nan_on_wire or t.partial_files for t in tallies.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
