"""The robot description is read from the shared G1 model and config/g1.yaml, mapped by joint name."""
import dataclasses
from pathlib import Path

import mujoco
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
from bcg.robot.description import compile_without_meshes

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


def same(a, b) -> bool:
    """Equal in value, type and, for arrays, dtype and shape: what a caller of either could tell apart."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("scene", ["scene_29dof.xml", "scene_23dof.xml"])
def test_the_description_without_meshes_is_the_full_model_s_in_every_field(scene):
    full, light = (RobotDescription.load(SHARED / scene, meshes=meshes) for meshes in (True, False))
    differ = [f.name for f in dataclasses.fields(RobotDescription)
              if not same(getattr(full, f.name), getattr(light, f.name))]
    assert differ == []
    assert (full.num_joints, full.mode_machine) == (light.num_joints, light.mode_machine)


@pytest.mark.parametrize("scene", ["scene_29dof.xml", "scene_23dof.xml"])
def test_without_meshes_every_element_keeps_its_id_and_every_body_its_inertia(scene):
    full = mujoco.MjModel.from_xml_path(str(SHARED / scene))
    light = compile_without_meshes(SHARED / scene)
    assert full.nmesh > 0 and light.nmesh == 0
    counts = ("nbody", "njnt", "nq", "nv", "nu", "ngeom", "nsite")
    assert [getattr(light, n) for n in counts] == [getattr(full, n) for n in counts]
    for name in ("body_mass", "body_inertia", "body_ipos", "body_iquat", "body_pos", "body_quat", "dof_armature",
                 "jnt_range", "actuator_ctrlrange", "actuator_trnid", "geom_bodyid"):
        np.testing.assert_array_equal(getattr(light, name), getattr(full, name), err_msg=name)
    primitive = full.geom_type != mujoco.mjtGeom.mjGEOM_MESH
    for name in ("geom_type", "geom_size", "geom_pos", "geom_contype", "geom_conaffinity"):
        np.testing.assert_array_equal(getattr(light, name)[primitive], getattr(full, name)[primitive], err_msg=name)


TETRAHEDRON = "0 0 0  0.2 0 0  0 0.2 0  0 0 0.2"


@pytest.mark.parametrize("compiler, inertial", [("", ""), ('<compiler inertiafromgeom="true"/>', "yes")])
def test_a_mesh_that_gives_its_body_inertia_is_kept(tmp_path, compiler, inertial):
    """Without an <inertial>, or with inertiafromgeom="true", a mesh geom's shape is its body's mass and
    inertia: it stays a mesh; a mesh on a body with an <inertial> does not."""
    given = '<inertial pos="0 0 0" mass="2" diaginertia="0.1 0.1 0.1"/>'
    path = tmp_path / "model.xml"
    path.write_text(f"""<mujoco>{compiler}<asset><mesh name="shape" vertex="{TETRAHEDRON}"/>
      <mesh name="look" vertex="{TETRAHEDRON}"/></asset>
      <worldbody><body name="base"><freejoint/>{given if inertial else ""}<geom type="mesh" mesh="shape"/>
        <body name="arm"><joint type="hinge"/>{given}<geom type="mesh" mesh="look" contype="0" conaffinity="0"/>
        <geom type="sphere" size="0.01"/></body></body></worldbody></mujoco>""")
    full, light = mujoco.MjModel.from_xml_path(str(path)), compile_without_meshes(path)
    for name in ("body_mass", "body_inertia", "body_ipos", "body_iquat"):
        np.testing.assert_allclose(getattr(light, name), getattr(full, name), err_msg=name)
    kept = [mujoco.mj_id2name(light, mujoco.mjtObj.mjOBJ_MESH, i) for i in range(light.nmesh)]
    assert kept == (["shape", "look"] if compiler else ["shape"])
    assert light.ngeom == full.ngeom and light.geom_type[2] == mujoco.mjtGeom.mjGEOM_SPHERE


def test_a_model_that_does_not_compile_gives_the_full_model_s_error(tmp_path):
    path = tmp_path / "model.xml"
    path.write_text('<mujoco><worldbody><geom type="mesh" mesh="missing"/></worldbody></mujoco>')
    with pytest.raises(ValueError) as full:
        mujoco.MjModel.from_xml_path(str(path))
    with pytest.raises(ValueError) as light:
        compile_without_meshes(path)
    assert str(light.value) == str(full.value)
