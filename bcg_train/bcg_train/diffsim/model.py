"""The simulator's immutable Model: the robot's physics data, built once from a MuJoCo model.

Everything is read from `mujoco.MjModel`: the kinematic tree, joint axes, anchors and ranges,
armature, damping, friction loss, body masses and inertias, actuator torque limits, gravity and the
foot contact spheres. Generalised coordinates: a floating base (position, unit quaternion w x y z;
velocity: world-frame linear, body-frame angular, as MuJoCo's free joint) followed by one hinge per
actuated joint, in MuJoCo's dof order. Floats in the precision chosen when it is built (`precision`).
Solver settings (contact stiffness, iterations, substeps, friction and limit constants, bundling) are
not part of the Model: they belong to each `Simulator` (`SimConfig`), so one Model serves simulators
with different settings.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import mujoco
import numpy as np
import warp as wp

from bcg.robot import RobotDescription

from .errors import ModelError
from .precision import ScalarTypes, scalar_types


@dataclass
class Model:
    """Arrays on `device`; index tables are built on the host once. Shapes use nb bodies, nv dofs,
    nj = nv - 6 hinge joints (actuator order), nc contact spheres, npair mass-matrix entries."""

    device: str
    nb: int
    nv: int
    nq: int
    nj: int
    nc: int
    npair: int
    gravity: np.ndarray                 # (3,) m/s^2
    precision: str = "float64"
    """Of every float array (config.PRECISIONS): a simulator of this Model simulates in it."""
    # bodies (robot tree, topological order, 0 = floating base)
    body_parent: wp.array = None        # int (nb,), -1 for the base
    body_dof: wp.array = None           # int (nb,), hinge dof of the body, -1 if none (base: -1)
    body_pos: wp.array = None           # vec3d (nb,), m, origin in the parent frame
    body_quat: wp.array = None          # quatd (nb,), x y z w, orientation in the parent frame
    body_mass: wp.array = None          # float (nb,), kg
    body_com: wp.array = None           # vec3d (nb,), m, centre of mass in the body frame
    body_inertia: wp.array = None       # mat33d (nb,), kg m^2, about the com, body axes
    jnt_axis: wp.array = None           # vec3d (nb,), hinge axis in the body frame (zero if none)
    jnt_anchor: wp.array = None         # vec3d (nb,), m, hinge anchor in the body frame
    # dofs
    dof_body: wp.array = None           # int (nv,)
    dof_parent: wp.array = None         # int (nv,), -1 for the first
    dof_armature: wp.array = None       # float (nv,), kg m^2
    dof_damping: wp.array = None        # float (nv,), N m s/rad
    dof_frictionloss: wp.array = None   # float (nv,), N m (MuJoCo's; SimConfig.frictionloss_scale multiplies it)
    dof_lower: wp.array = None          # float (nv,), rad (base dofs: unlimited)
    dof_upper: wp.array = None          # float (nv,), rad
    dof_limited: wp.array = None        # int (nv,)
    # actuated joints, in the robot description's (SDK) order
    joint_dof: wp.array = None          # int (nj,), dof driven by joint j
    dof_joint: wp.array = None          # int (nv,), joint driving dof d, -1 if none
    tau_limit: wp.array = None          # float (nj,), N m
    # mass matrix sparsity, row by row: (i, i), (i, parent(i)), ... (see sparse_ldl)
    pair_i: wp.array = None             # int (npair,)
    pair_j: wp.array = None             # int (npair,)
    dof_row_start: wp.array = None      # int (nv + 1,), pairs of row i: [start[i], start[i + 1])
    # contact spheres
    sphere_body: wp.array = None        # int (nc,)
    sphere_pos: wp.array = None         # vec3d (nc,), m, centre in the body frame
    sphere_radius: wp.array = None      # float (nc,), m
    sphere_friction: wp.array = None    # float (nc,), Coulomb coefficient against the floor
    contact_dof_d: wp.array = None      # int (ncd,), dof of each (contact, ancestor dof) entry
    contact_dof_start: wp.array = None  # int (nc + 1,), entries of contact k: [start[k], start[k + 1]), leaf first
    sphere_common: wp.array = None      # int (nc, nc), number of dofs the chains of two spheres share
    sphere_leg: wp.array = None         # int (nc,), 0 left foot, 1 right foot
    leg_dof_start: wp.array = None      # int (3,), hinge dofs of leg l: leg_dof[start[l]:start[l + 1]]
    leg_dof: wp.array = None            # int, hinge dofs from the base to each foot (base dofs excluded)
    # host-side facts for users and validation
    robot: RobotDescription = None
    body_names: Tuple[str, ...] = ()    # (nb,) MuJoCo name of each simulator body
    mj_body_ids: np.ndarray = None      # (nb,) MuJoCo body id of each simulator body
    mj_qpos_adr: np.ndarray = None      # (nq,) MuJoCo qpos index of each simulator coordinate
    mj_dof_adr: np.ndarray = None       # (nv,) MuJoCo dof index of each simulator dof

    @property
    def ndof_contact(self) -> int:
        """Contact rows: 3 per sphere (normal, two tangents)."""
        return 3 * self.nc

    @property
    def ncd(self) -> int:
        """Entries (sphere, ancestor dof) of the contact Jacobian's support."""
        return self.contact_dof_d.shape[0]

    @property
    def types(self) -> ScalarTypes:
        """The Warp, NumPy and torch types of `precision`."""
        return scalar_types(self.precision)

    @classmethod
    def from_mujoco(cls, path: Optional[Union[str, Path]] = None, device: Optional[str] = None,
                    precision: str = "float64") -> "Model":
        """Build from the G1 XML (resolved like every other part of the suite, see bcg.robot) on
        `device` (Warp's preferred device when omitted), floats in `precision`."""
        robot = RobotDescription.load(path)
        m = mujoco.MjModel.from_xml_path(str(robot.model_path))
        return cls.from_mjmodel(m, robot, device or wp.get_preferred_device().alias, precision)

    @classmethod
    def from_mjmodel(cls, m: mujoco.MjModel, robot: RobotDescription, device: str,
                     precision: str = "float64") -> "Model":
        """The robot tree of `m` rooted at `robot.root_body`: its bodies, dofs (hinges, limits,
        actuators), mass-matrix sparsity and foot contact spheres, as arrays on `device` (floats in
        `precision`)."""
        t = scalar_types(precision)
        real, vec3, quat, mat33 = t.real, t.vec3, t.quat, t.mat33
        tree = _Tree.of(m, robot.root_body)
        dofs = _Dofs.of(m, tree)
        nv = len(dofs.body)
        joint_dof = _actuated_dofs(m, robot, dofs.mj_dof)
        dof_joint = -np.ones(nv, dtype=np.int32)
        dof_joint[joint_dof] = np.arange(len(joint_dof))
        pairs = [(i, j) for i in range(nv) for j in _ancestors_or_self(i, dofs.parent)]
        feet = _Feet.of(m, robot, tree, dofs)
        limited, lower, upper = _hinge_limits(m, dofs.mj_dof)
        bodies, mj_d = tree.bodies, dofs.mj_dof

        def arr(x, dtype):
            return wp.array(np.ascontiguousarray(x), dtype=dtype, device=device)

        i32 = wp.int32
        return cls(
            device=device, nb=len(bodies), nv=nv, nq=nv + 1, nj=len(joint_dof), nc=len(feet.geoms),
            npair=len(pairs), gravity=m.opt.gravity.copy(), precision=precision,
            body_parent=arr(tree.parent, i32), body_dof=arr(dofs.of_body, i32), body_pos=arr(m.body_pos[bodies], vec3),
            body_quat=arr(np.roll(m.body_quat[bodies], -1, axis=1), quat), body_mass=arr(m.body_mass[bodies], real),
            body_com=arr(m.body_ipos[bodies], vec3), body_inertia=arr(_body_inertias(m, bodies), mat33),
            jnt_axis=arr(dofs.axis, vec3), jnt_anchor=arr(dofs.anchor, vec3),
            dof_body=arr(dofs.body, i32), dof_parent=arr(dofs.parent, i32),
            dof_armature=arr(m.dof_armature[mj_d], real), dof_damping=arr(m.dof_damping[mj_d], real),
            dof_frictionloss=arr(m.dof_frictionloss[mj_d], real),
            dof_lower=arr(lower, real), dof_upper=arr(upper, real), dof_limited=arr(limited, i32),
            joint_dof=arr(joint_dof, i32), dof_joint=arr(dof_joint, i32), tau_limit=arr(robot.tau_limit, real),
            pair_i=arr([p[0] for p in pairs], i32), pair_j=arr([p[1] for p in pairs], i32),
            dof_row_start=arr(np.searchsorted([p[0] for p in pairs], np.arange(nv + 1)), i32),
            sphere_body=arr(feet.body, i32), sphere_pos=arr(m.geom_pos[feet.geoms], vec3),
            sphere_radius=arr(m.geom_size[feet.geoms, 0], real), sphere_friction=arr(feet.friction, real),
            contact_dof_d=arr([d for _, d in feet.chain_dofs], i32),
            contact_dof_start=arr(np.searchsorted([c for c, _ in feet.chain_dofs], np.arange(len(feet.geoms) + 1)),
                                  i32),
            sphere_common=arr(np.array(feet.common, dtype=np.int32), i32),
            sphere_leg=arr(feet.side, i32),
            leg_dof_start=arr([0, len(feet.legs[0]), len(feet.legs[0]) + len(feet.legs[1])], i32),
            leg_dof=arr(feet.legs[0] + feet.legs[1], i32),
            robot=robot, body_names=tuple(m.body(b).name for b in bodies), mj_body_ids=np.array(bodies),
            mj_qpos_adr=np.array(dofs.mj_qpos), mj_dof_adr=mj_d,
        )

    def default_qpos(self, height: float) -> np.ndarray:
        """(nq,) base at `height` m, upright, joints at the description's default pose (at
        `robot.standing_height` the lowest foot sphere touches the ground)."""
        q = np.zeros(self.nq)
        q[2] = height
        q[3] = 1.0
        q[7 + self.joint_dof.numpy() - 6] = self.robot.default_q
        return q


def _ancestors_or_self(i, dof_parent):
    out = []
    while i >= 0:
        out.append(int(i))
        i = dof_parent[i]
    return out


@dataclass(frozen=True)
class _Tree:
    """The robot's bodies in MuJoCo's (topological) order, the floating base first."""

    bodies: List[int]
    """MuJoCo body id of each simulator body."""
    local: Dict[int, int]
    """MuJoCo body id -> simulator body."""
    parent: np.ndarray
    """(nb,) simulator parent of each body, -1 for the base."""

    @classmethod
    def of(cls, m: mujoco.MjModel, root: int) -> "_Tree":
        bodies = [b for b in range(m.nbody) if b != 0 and m.body_rootid[b] == root]
        if bodies[0] != root:
            raise ModelError("the floating base must be the first body of the robot tree")
        local = {b: i for i, b in enumerate(bodies)}
        return cls(bodies, local, np.array([local.get(int(m.body_parentid[b]), -1) for b in bodies]))


@dataclass
class _Dofs:
    """The dofs: six of the free joint, then one per hinge in body order."""

    body: List[int]
    """(nv,) body each dof moves."""
    parent: List[int]
    """(nv,) the dof before it on the way to the base, -1 for the first."""
    of_body: np.ndarray
    """(nb,) int32 hinge dof of each body, -1 if none."""
    last: np.ndarray
    """(nb,) the nearest dof at or above each body."""
    axis: np.ndarray
    """(nb, 3) hinge axis in the body frame (zero if none)."""
    anchor: np.ndarray
    """(nb, 3) m, hinge anchor in the body frame."""
    mj_qpos: List[int]
    """(nq,) MuJoCo qpos index of each coordinate."""
    mj_dof: np.ndarray
    """(nv,) MuJoCo dof index of each dof."""

    @classmethod
    def of(cls, m: mujoco.MjModel, tree: _Tree) -> "_Dofs":
        """ModelError unless the base carries one free joint and every other body at most one hinge."""
        bodies, nb = tree.bodies, len(tree.bodies)
        base_joint = m.body_jntadr[bodies[0]]
        if m.body_jntnum[bodies[0]] != 1 or m.jnt_type[base_joint] != mujoco.mjtJoint.mjJNT_FREE:
            raise ModelError("the base body must carry exactly one free joint")
        out = cls(body=[0] * 6, parent=[-1, 0, 1, 2, 3, 4], of_body=-np.ones(nb, dtype=np.int32),
                  last=np.full(nb, 5), axis=np.zeros((nb, 3)), anchor=np.zeros((nb, 3)),
                  mj_qpos=list(range(m.jnt_qposadr[base_joint], m.jnt_qposadr[base_joint] + 7)),
                  mj_dof=np.array(list(range(m.jnt_dofadr[base_joint], m.jnt_dofadr[base_joint] + 6))))
        mj_dof = list(out.mj_dof)
        for i, b in enumerate(bodies[1:], start=1):
            out.last[i] = out.last[tree.parent[i]]
            if m.body_jntnum[b] == 0:
                continue
            j = m.body_jntadr[b]
            if m.body_jntnum[b] > 1 or m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
                raise ModelError(f"body {m.body(b).name!r}: only one hinge joint per body is supported")
            d = len(out.body)
            out.of_body[i] = d
            out.body.append(i)
            out.parent.append(int(out.last[i]))
            out.last[i] = d
            out.axis[i] = m.jnt_axis[j]
            out.anchor[i] = m.jnt_pos[j]
            out.mj_qpos.append(int(m.jnt_qposadr[j]))
            mj_dof.append(int(m.jnt_dofadr[j]))
        out.mj_dof = np.array(mj_dof)
        return out


@dataclass(frozen=True)
class _Feet:
    """The foot contact spheres (the description's foot geoms, left then right)."""

    geoms: List[int]
    """(nc,) MuJoCo geom id of each sphere."""
    side: List[int]
    """(nc,) 0 left foot, 1 right foot."""
    body: np.ndarray
    """(nc,) simulator body each sphere sits on."""
    friction: np.ndarray
    """(nc,) Coulomb coefficient against the floor (MuJoCo combines geom frictions with max())."""
    chain_dofs: List[Tuple[int, int]]
    """(sphere, dof) for every dof on each sphere's way to the base, leaf first."""
    common: List[List[int]]
    """(nc, nc) number of dofs two spheres' chains share."""
    legs: List[List[int]]
    """Per side, the hinge dofs from the base to that foot."""

    @classmethod
    def of(cls, m: mujoco.MjModel, robot: RobotDescription, tree: _Tree, dofs: _Dofs) -> "_Feet":
        """ModelError unless each foot's spheres sit on one body chain."""
        spheres = [(g, side) for side, key in enumerate(("left", "right")) for g in robot.foot_geoms[key]]
        body = np.array([tree.local[int(m.geom_bodyid[g])] for g, _ in spheres])
        floor = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE]
        floor_mu = m.geom_friction[floor[0], 0] if floor else 0.0      # the floor plane z = 0 is the ground
        chains = [_ancestors_or_self(dofs.last[b], dofs.parent) for b in body]
        legs = []
        for side in (0, 1):
            leg_chains = {tuple(c) for c, (_, sd) in zip(chains, spheres) if sd == side}
            if len(leg_chains) != 1:
                raise ModelError(f"the {('left', 'right')[side]} foot's contact spheres must sit on one body chain")
            legs.append(sorted(d for d in leg_chains.pop() if d >= 6))
        return cls(geoms=[g for g, _ in spheres], side=[sd for _, sd in spheres], body=body,
                   friction=np.array([max(m.geom_friction[g, 0], floor_mu) for g, _ in spheres]),
                   chain_dofs=[(k, d) for k, chain in enumerate(chains) for d in chain],
                   common=[[len(set(a) & set(b)) for b in chains] for a in chains], legs=legs)


def _body_inertias(m: mujoco.MjModel, bodies: List[int]) -> np.ndarray:
    """(nb, 3, 3) kg m^2 inertia of each body about its com, in the body's axes."""
    inertia = np.zeros((len(bodies), 3, 3))
    for i, b in enumerate(bodies):
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, m.body_iquat[b])
        rot = rot.reshape(3, 3)
        inertia[i] = rot @ np.diag(m.body_inertia[b]) @ rot.T
    return inertia


def _hinge_limits(m: mujoco.MjModel, mj_dof: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(limited (nv,) int32, lower (nv,) rad, upper (nv,) rad) of each dof (the base's: unlimited)."""
    nv = len(mj_dof)
    joint = m.dof_jntid[mj_dof]
    limited = np.zeros(nv, dtype=np.int32)
    lower, upper = np.zeros(nv), np.zeros(nv)
    limited[6:] = m.jnt_limited[joint[6:]]
    lower[6:] = m.jnt_range[joint[6:], 0]
    upper[6:] = m.jnt_range[joint[6:], 1]
    return limited, lower, upper


def _actuated_dofs(m: mujoco.MjModel, robot: RobotDescription, mj_dof: np.ndarray) -> np.ndarray:
    """(nj,) the dof each of the description's actuators drives, in its (SDK) order."""
    local = {int(d): k for k, d in enumerate(mj_dof)}
    return np.array([local[int(m.jnt_dofadr[m.actuator_trnid[a, 0]])] for a in robot.actuator_ids])
