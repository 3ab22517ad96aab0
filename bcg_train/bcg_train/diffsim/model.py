"""The simulator's immutable Model: the robot's physics data, built once from a MuJoCo model.

Everything is read from `mujoco.MjModel`: the kinematic tree, joint axes, anchors and ranges,
armature, damping, friction loss, body masses and inertias, actuator torque limits, gravity and the
foot contact spheres. Generalised coordinates: a floating base (position, unit quaternion w x y z;
velocity: world-frame linear, body-frame angular, as MuJoCo's free joint) followed by one hinge per
actuated joint, in MuJoCo's dof order. Floats in the package flavour's precision (`precision`).
Solver settings (contact stiffness, iterations, substeps, friction and limit constants, bundling) are
not part of the Model: they belong to each `Simulator` (`SimConfig`), so one Model serves simulators
with different settings.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional, Tuple, Union

import mujoco
import numpy as np
import warp as wp

from bcg.robot import RobotDescription

from .errors import ModelError
from .precision import scalar_types

T = scalar_types(__name__)
real, vec3, quat, mat33 = T.real, T.vec3, T.quat, T.mat33


@dataclass
class Model:
    """Arrays on `device`; index tables are built on the host once. Shapes use nb bodies, nv dofs,
    nj = nv - 6 hinge joints (actuator order), nc contact spheres, npair mass-matrix entries."""

    precision: ClassVar[str] = T.precision
    """Of every float array: the package flavour's (`diffsim.precision`)."""
    device: str
    nb: int
    nv: int
    nq: int
    nj: int
    nc: int
    npair: int
    gravity: np.ndarray                 # (3,) m/s^2
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

    @classmethod
    def from_mujoco(cls, path: Optional[Union[str, Path]] = None, device: Optional[str] = None) -> "Model":
        """Build from the G1 XML (resolved like every other part of the suite, see bcg.robot) on
        `device` (Warp's preferred device when omitted)."""
        robot = RobotDescription.load(path)
        m = mujoco.MjModel.from_xml_path(str(robot.model_path))
        return cls.from_mjmodel(m, robot, device or wp.get_preferred_device().alias)

    @classmethod
    def from_mjmodel(cls, m: mujoco.MjModel, robot: RobotDescription, device: str) -> "Model":
        root = robot.root_body
        bodies = [b for b in range(m.nbody) if b != 0 and m.body_rootid[b] == root]
        local = {b: i for i, b in enumerate(bodies)}
        if bodies[0] != root:
            raise ModelError("the floating base must be the first body of the robot tree")
        nb = len(bodies)
        parent = np.array([local.get(int(m.body_parentid[b]), -1) for b in bodies])
        body_dof = -np.ones(nb, dtype=np.int32)
        axis = np.zeros((nb, 3))
        anchor = np.zeros((nb, 3))
        mj_q, mj_d = list(range(m.jnt_qposadr[m.body_jntadr[root]], m.jnt_qposadr[m.body_jntadr[root]] + 7)), \
            list(range(m.jnt_dofadr[m.body_jntadr[root]], m.jnt_dofadr[m.body_jntadr[root]] + 6))
        dof_body = [0] * 6
        dof_parent = [-1, 0, 1, 2, 3, 4]
        last_dof = np.full(nb, 5)
        for i, b in enumerate(bodies):
            n = m.body_jntnum[b]
            if i == 0:
                if n != 1 or m.jnt_type[m.body_jntadr[b]] != mujoco.mjtJoint.mjJNT_FREE:
                    raise ModelError("the base body must carry exactly one free joint")
                continue
            last_dof[i] = last_dof[parent[i]]
            if n == 0:
                continue
            j = m.body_jntadr[b]
            if n > 1 or m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
                raise ModelError(f"body {m.body(b).name!r}: only one hinge joint per body is supported")
            d = len(dof_body)
            body_dof[i] = d
            dof_body.append(i)
            dof_parent.append(int(last_dof[i]))
            last_dof[i] = d
            axis[i] = m.jnt_axis[j]
            anchor[i] = m.jnt_pos[j]
            mj_q.append(int(m.jnt_qposadr[j]))
            mj_d.append(int(m.jnt_dofadr[j]))
        nv = len(dof_body)
        mj_d = np.array(mj_d)
        inertia = np.zeros((nb, 3, 3))
        for i, b in enumerate(bodies):
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, m.body_iquat[b])
            rot = rot.reshape(3, 3)
            inertia[i] = rot @ np.diag(m.body_inertia[b]) @ rot.T
        dof_jnt = m.dof_jntid[mj_d]
        limited = np.zeros(nv, dtype=np.int32)
        lower = np.zeros(nv)
        upper = np.zeros(nv)
        limited[6:] = m.jnt_limited[dof_jnt[6:]]
        lower[6:] = m.jnt_range[dof_jnt[6:], 0]
        upper[6:] = m.jnt_range[dof_jnt[6:], 1]
        mj_dof_to_local = {int(d): k for k, d in enumerate(mj_d)}
        joint_dof = np.array([mj_dof_to_local[int(m.jnt_dofadr[m.actuator_trnid[a, 0]])] for a in robot.actuator_ids])
        dof_joint = -np.ones(nv, dtype=np.int32)
        dof_joint[joint_dof] = np.arange(len(joint_dof))
        pairs = [(i, j) for i in range(nv) for j in _ancestors_or_self(i, dof_parent)]
        spheres = [(g, side) for side, key in enumerate(("left", "right")) for g in robot.foot_geoms[key]]
        sphere_body = np.array([local[int(m.geom_bodyid[g])] for g, _ in spheres])
        floor = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE]
        floor_mu = m.geom_friction[floor[0], 0] if floor else 0.0
        # MuJoCo combines geom frictions with max(); the floor plane z = 0 is the ground.
        friction = np.array([max(m.geom_friction[g, 0], floor_mu) for g, _ in spheres])
        chains = [_ancestors_or_self(last_dof[b], dof_parent) for b in sphere_body]
        cd = [(k, d) for k, chain in enumerate(chains) for d in chain]
        common = [[len(set(a) & set(b)) for b in chains] for a in chains]
        legs = []
        for side in (0, 1):
            leg_chains = {tuple(c) for c, (_, sd) in zip(chains, spheres) if sd == side}
            if len(leg_chains) != 1:
                raise ModelError(f"the {('left', 'right')[side]} foot's contact spheres must sit on one body chain")
            legs.append(sorted(d for d in leg_chains.pop() if d >= 6))
        quat_xyzw = np.roll(m.body_quat[bodies], -1, axis=1)

        def arr(x, dtype):
            return wp.array(np.ascontiguousarray(x), dtype=dtype, device=device)

        i32 = wp.int32
        return cls(
            device=device, nb=nb, nv=nv, nq=nv + 1, nj=len(joint_dof), nc=len(spheres),
            npair=len(pairs), gravity=m.opt.gravity.copy(),
            body_parent=arr(parent, i32), body_dof=arr(body_dof, i32), body_pos=arr(m.body_pos[bodies], vec3),
            body_quat=arr(quat_xyzw, quat), body_mass=arr(m.body_mass[bodies], real),
            body_com=arr(m.body_ipos[bodies], vec3), body_inertia=arr(inertia, mat33),
            jnt_axis=arr(axis, vec3), jnt_anchor=arr(anchor, vec3),
            dof_body=arr(dof_body, i32), dof_parent=arr(dof_parent, i32),
            dof_armature=arr(m.dof_armature[mj_d], real), dof_damping=arr(m.dof_damping[mj_d], real),
            dof_frictionloss=arr(m.dof_frictionloss[mj_d], real),
            dof_lower=arr(lower, real), dof_upper=arr(upper, real), dof_limited=arr(limited, i32),
            joint_dof=arr(joint_dof, i32), dof_joint=arr(dof_joint, i32), tau_limit=arr(robot.tau_limit, real),
            pair_i=arr([p[0] for p in pairs], i32), pair_j=arr([p[1] for p in pairs], i32),
            dof_row_start=arr(np.searchsorted([p[0] for p in pairs], np.arange(nv + 1)), i32),
            sphere_body=arr(sphere_body, i32), sphere_pos=arr(m.geom_pos[[g for g, _ in spheres]], vec3),
            sphere_radius=arr(m.geom_size[[g for g, _ in spheres], 0], real), sphere_friction=arr(friction, real),
            contact_dof_d=arr([d for _, d in cd], i32),
            contact_dof_start=arr(np.searchsorted([c for c, _ in cd], np.arange(len(spheres) + 1)), i32),
            sphere_common=arr(np.array(common, dtype=np.int32), i32),
            sphere_leg=arr([sd for _, sd in spheres], i32),
            leg_dof_start=arr([0, len(legs[0]), len(legs[0]) + len(legs[1])], i32), leg_dof=arr(legs[0] + legs[1], i32),
            robot=robot, body_names=tuple(m.body(b).name for b in bodies), mj_body_ids=np.array(bodies),
            mj_qpos_adr=np.array(mj_q), mj_dof_adr=mj_d,
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
