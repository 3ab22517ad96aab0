"""The robot description is read from the shared G1 model and config/g1.yaml, mapped by joint name."""
from pathlib import Path

import numpy as np
import pytest

from bcg.robot import (
    MODEL_ENV_VAR,
    SDK_JOINT_NAMES,
    ModelNotFoundError,
    RobotDescription,
    RobotDescriptionError,
    resolve_model_path,
)

SHARED = Path(__file__).resolve().parents[3] / "shared" / "robots" / "unitree_g1"


def test_29dof_maps_every_slot_in_sdk_order():
    r = RobotDescription.load(SHARED / "scene_29dof.xml")
    assert r.joint_names == SDK_JOINT_NAMES
    assert r.mode_machine == 5
    np.testing.assert_array_equal(r.motor_slots, np.arange(29))
    assert r.valid_slots[:29].all() and not r.valid_slots[29:].any()
    # torque limits read from the model (G1.md: knee 139, ankles 50, wrist pitch 5)
    assert r.tau_limit[SDK_JOINT_NAMES.index("left_knee_joint")] == 139
    assert r.tau_limit[SDK_JOINT_NAMES.index("right_ankle_roll_joint")] == 50
    assert r.tau_limit[SDK_JOINT_NAMES.index("left_wrist_pitch_joint")] == 5
    assert all(len(g) == 4 for g in r.foot_geoms.values())
    assert np.all(r.q_lower < r.default_q) and np.all(r.default_q < r.q_upper)


def test_23dof_masks_the_missing_slots_by_name():
    r = RobotDescription.load(SHARED / "scene_23dof.xml")
    assert r.num_joints == 23 and r.mode_machine == 4
    assert sorted(np.flatnonzero(~r.valid_slots[:29])) == [13, 14, 20, 21, 27, 28]
    for name, slot in zip(r.joint_names, r.motor_slots):
        assert SDK_JOINT_NAMES[slot] == name


def test_model_path_order_and_errors(monkeypatch, tmp_path):
    monkeypatch.setenv(MODEL_ENV_VAR, str(SHARED / "scene_23dof.xml"))
    assert resolve_model_path(SHARED / "scene_29dof.xml").name == "scene_29dof.xml"   # explicit wins
    assert resolve_model_path().name == "scene_23dof.xml"
    menagerie = tmp_path / "unitree_g1"
    menagerie.mkdir()
    (menagerie / "scene.xml").write_text("<mujoco/>")
    monkeypatch.setenv(MODEL_ENV_VAR, str(menagerie))
    assert resolve_model_path() == menagerie / "scene.xml"
    monkeypatch.delenv(MODEL_ENV_VAR)
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path / "empty"))     # no download: menagerie has nothing
    with pytest.raises(ModelNotFoundError, match="BCG_G1_MODEL"):
        resolve_model_path()
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model_path(tmp_path / "nope.xml")


def test_gains_file_errors_name_the_key(tmp_path):
    bad = tmp_path / "g1.yaml"
    bad.write_text("g1:\n  damping_kd: 4\n  joints:\n    left_hip_pitch_joint: {default_q: 0, kp: 1}\n")
    with pytest.raises(RobotDescriptionError, match="left_hip_pitch_joint.kd"):
        RobotDescription.load(SHARED / "scene_29dof.xml", gains=bad)
