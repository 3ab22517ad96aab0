"""The robot description: joint order, limits, gains and feet, read from the MuJoCo model + g1.yaml.

Nothing here is typed in by hand except what the model cannot hold (default pose and PD gains, in
config/g1.yaml). Joints are mapped to SDK motor slots by name, so 29-DoF, 23-DoF and other variants
of the model map correctly.
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

import mujoco
import numpy as np
import yaml

from ..config_files import config_file
from .model_path import resolve_model_path
from .sdk_joints import MODE_MACHINE, NUM_MOTOR_SLOTS, SDK_JOINT_NAMES

FOOT_JOINTS = {"left": "left_ankle_roll_joint", "right": "right_ankle_roll_joint"}
"""The joint whose child body carries each foot's contact spheres."""


class RobotDescriptionError(ValueError):
    """The model or g1.yaml does not describe a G1 this suite can drive."""


@dataclass(frozen=True)
class RobotDescription:
    """A G1 as the nodes and the trainer see it. Arrays are (num_joints,) in the model's actuator order.

    The model's actuator order is the SDK order for Unitree's models; `motor_slots` maps each joint
    to its SDK slot by name regardless.
    """

    model_path: Path
    joint_names: Tuple[str, ...]
    motor_slots: np.ndarray          # int (num_joints,), SDK slot 0..28 of each joint
    joint_qpos_adr: np.ndarray       # int (num_joints,), index into MjData.qpos
    joint_dof_adr: np.ndarray        # int (num_joints,), index into MjData.qvel
    actuator_ids: np.ndarray         # int (num_joints,), MuJoCo actuator driving each joint
    q_lower: np.ndarray              # rad
    q_upper: np.ndarray              # rad
    tau_limit: np.ndarray            # N m, symmetric
    default_q: np.ndarray            # rad
    kp: np.ndarray                   # N m/rad
    kd: np.ndarray                   # N m s/rad
    damping_kd: float                # N m s/rad, damping mode
    joint_inertia: np.ndarray        # kg m^2, the smallest inertia each joint can see (`_joint_inertia`)
    standing_height: float           # m, pelvis height of the default pose with the feet's lowest sphere on z = 0
    foot_geoms: Dict[str, Tuple[int, ...]]   # 'left'/'right' -> sphere geom ids
    root_body: int                   # MuJoCo body id of the floating base (pelvis)
    valid_slots: np.ndarray = field(repr=False)   # bool (35,)

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    @property
    def mode_machine(self) -> int:
        return MODE_MACHINE[self.num_joints]

    @classmethod
    def load(cls, model: Optional[Union[str, Path]] = None, gains: Optional[Union[str, Path]] = None,
             meshes: bool = True) -> "RobotDescription":
        """Read the model (path resolved by `resolve_model_path`) and the gains file (default config/g1.yaml).

        `meshes=False`: the same description from the model compiled without the meshes it does not
        depend on (`compile_without_meshes`), in a tenth of the time; for callers that need nothing
        but the description (the policy node)."""
        path = resolve_model_path(model)
        return cls.from_mjmodel(mujoco.MjModel.from_xml_path(str(path)) if meshes else compile_without_meshes(path),
                                path, gains)

    @classmethod
    def from_mjmodel(cls, m: mujoco.MjModel, path: Path,
                     gains: Optional[Union[str, Path]] = None) -> "RobotDescription":
        free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        if len(free) != 1:
            raise RobotDescriptionError(f"{path}: expected one free (floating base) joint, found {len(free)}")
        root_body = int(m.jnt_bodyid[free[0]])
        names, acts = [], []
        for a in range(m.nu):
            j = int(m.actuator_trnid[a, 0])
            if m.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT or m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
                raise RobotDescriptionError(f"{path}: actuator {m.actuator(a).name!r} does not drive a hinge joint")
            if m.body_rootid[m.jnt_bodyid[j]] != root_body:
                continue  # placeholder joint outside the robot (the 23-DoF model keeps 6 of these)
            names.append(m.joint(j).name)
            acts.append(a)
        unknown = [n for n in names if n not in SDK_JOINT_NAMES]
        if unknown:
            raise RobotDescriptionError(f"{path}: joints with no SDK motor slot: {unknown}")
        if len(names) not in MODE_MACHINE:
            raise RobotDescriptionError(f"{path}: {len(names)} actuated robot joints; "
                                        f"supported: {sorted(MODE_MACHINE)}")
        jids = np.array([m.actuator_trnid[a, 0] for a in acts])
        act_ids = np.array(acts)
        tau = np.where(m.actuator_ctrllimited[act_ids].astype(bool), m.actuator_ctrlrange[act_ids, 1],
                       m.jnt_actfrcrange[jids, 1])
        if np.any(tau <= 0):
            raise RobotDescriptionError(f"{path}: every actuator needs a torque limit (ctrlrange or actuatorfrcrange)")
        default_q, kp, kd, damping_kd = _read_gains(Path(gains) if gains else config_file("g1.yaml"), names)
        slots = np.array([SDK_JOINT_NAMES.index(n) for n in names])
        valid = np.zeros(NUM_MOTOR_SLOTS, dtype=bool)
        valid[slots] = True
        feet = {}
        for side, jname in FOOT_JOINTS.items():
            body = m.joint(jname).bodyid[0]
            spheres = tuple(int(g) for g in range(m.ngeom)
                            if m.geom_bodyid[g] == body and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE
                            and m.geom_contype[g] | m.geom_conaffinity[g])
            if not spheres:
                raise RobotDescriptionError(f"{path}: no contact spheres on the {side} foot ({jname}'s body)")
            feet[side] = spheres
        return cls(model_path=Path(path), joint_names=tuple(names), motor_slots=slots,
                   joint_inertia=_joint_inertia(m, jids, default_q),
                   standing_height=_standing_height(m, jids, default_q, root_body, feet),
                   joint_qpos_adr=m.jnt_qposadr[jids].copy(), joint_dof_adr=m.jnt_dofadr[jids].copy(),
                   actuator_ids=act_ids, q_lower=m.jnt_range[jids, 0].copy(), q_upper=m.jnt_range[jids, 1].copy(),
                   tau_limit=tau.astype(float), default_q=default_q, kp=kp, kd=kd, damping_kd=damping_kd,
                   foot_geoms=feet, root_body=root_body, valid_slots=valid)


BOX_HALF_SIZE = 1e-3
"""m, half size of the box that stands in for a mesh geom in `compile_without_meshes`."""


def compile_without_meshes(path: Path) -> mujoco.MjModel:
    """The model at `path` compiled without the meshes the description cannot depend on.

    A mesh geom's shape can change nothing the description reads (joints, actuators, limits, the
    bodies' masses and inertias, the foot spheres and their ids) unless it gives its body's inertia:
    so each mesh geom of a body with an explicit <inertial> (while the compiler does not take inertia
    from geoms regardless) becomes a small box, and the meshes no geom then uses are left out. No
    element is removed, so every body, joint, actuator and geom keeps its id. Compiling the G1's 36
    meshes (185k vertices) is nearly all of the full model's compile time. test_robot_description
    compares every field of the description built both ways. A model this pass cannot compile
    (an element it does not know of needs a dropped mesh) is compiled in full instead: the result
    or the error is then the full model's."""
    try:
        spec = mujoco.MjSpec.from_file(str(path))
        geoms_give_inertia = spec.compiler.inertiafromgeom == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE
        used = set()
        for geom in spec.geoms:
            if geom.type == mujoco.mjtGeom.mjGEOM_MESH and not geoms_give_inertia and geom.parent.explicitinertial:
                geom.type, geom.size, geom.meshname = mujoco.mjtGeom.mjGEOM_BOX, [BOX_HALF_SIZE] * 3, ""
            elif geom.meshname:
                used.add(geom.meshname)
        for mesh in list(spec.meshes):
            if mesh.name not in used:
                spec.delete(mesh)
        return spec.compile()
    except ValueError:
        return mujoco.MjModel.from_xml_path(str(path))


def _standing_height(m: mujoco.MjModel, joints: np.ndarray, default_q: np.ndarray, root_body: int,
                     feet: Dict[str, Tuple[int, ...]]) -> float:
    """Pelvis height [m] at which the default pose, upright, has its lowest foot sphere touching z = 0."""
    data = mujoco.MjData(m)
    root = m.jnt_qposadr[m.body_jntadr[root_body]]
    data.qpos[root:root + 7] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    data.qpos[m.jnt_qposadr[joints]] = default_q
    mujoco.mj_kinematics(m, data)
    spheres = [g for side in feet.values() for g in side]
    return float(-np.min(data.geom_xpos[spheres, 2] - m.geom_size[spheres, 0]))


def _joint_inertia(m: mujoco.MjModel, joints: np.ndarray, default_q: np.ndarray) -> np.ndarray:
    """(num_joints,) kg m^2: 1 / (M^-1)_jj at the default pose with the floating base free, M the
    joint-space inertia matrix (armature included): the inertia a joint's torque meets when every
    other joint and the base move freely, i.e. its reflected link inertia plus rotor armature with
    nothing held. Contact and the other joints' gains only add to it, so PD stability checked
    against it (`pd_stability`) holds in stance as well as in the air."""
    data = mujoco.MjData(m)
    data.qpos[m.jnt_qposadr[joints]] = default_q
    mujoco.mj_forward(m, data)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, data, full)
    return 1.0 / np.diag(np.linalg.inv(full))[m.jnt_dofadr[joints]]


def _read_gains(path: Path, names):
    """(default_q, kp, kd, damping_kd) for `names` from a g1.yaml; errors name the file and key."""
    try:
        doc = yaml.safe_load(path.read_text())
        g1 = doc["g1"]
        joints = g1["joints"]
        damping_kd = float(g1["damping_kd"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as e:
        raise RobotDescriptionError(f"{path}: needs g1.damping_kd and g1.joints ({type(e).__name__}: {e})") from e
    out = np.zeros((3, len(names)))
    for i, n in enumerate(names):
        for k, key in enumerate(("default_q", "kp", "kd")):
            try:
                out[k, i] = float(joints[n][key])
            except (KeyError, TypeError, ValueError) as e:
                raise RobotDescriptionError(f"{path}: g1.joints.{n}.{key} is missing or not a number") from e
    if np.any(out[1:] < 0) or damping_kd < 0:
        raise RobotDescriptionError(f"{path}: gains must be non-negative")
    return out[0], out[1], out[2], damping_kd
