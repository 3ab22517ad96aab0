"""The two simulators an exported policy is evaluated in, behind one small interface.

- `MujocoPlant`: the sim bridge's physics core (MuJoCo at `physics_hz`, the motor PD law inside every
  physics step), in process: the same physics `mujoco_check` runs, without DDS.
- `WarpPlant`: the training simulator (bcg_train.diffsim, no gradients) at its contact stiffness.

Both hold N = 1 robot; joint arrays are in the robot description's order; quaternions (w x y z).
"""
from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from bcg.mujoco_plant import FootContacts, JointCommand, PhysicsCore, self_contacts
from bcg.robot import RobotDescription
from bcg_train.diffsim import Model, SimConfig, Simulator
from bcg_train.diffsim.torch_bridge import body_frames


@dataclass
class PlantState:
    """What the policy and the metrics read after a control period."""

    base_quat: np.ndarray       # (4,) pelvis orientation, world
    base_ang_vel: np.ndarray    # (3,) rad/s, pelvis frame (the IMU gyro)
    joint_pos: np.ndarray       # (n,) rad
    joint_vel: np.ndarray       # (n,) rad/s
    root_height: float          # m
    body_pos: np.ndarray        # (B, 3) m, world, the robot's bodies in MuJoCo order (root first)
    contact_height: np.ndarray  # (k,) m, signed height of each foot sphere in contact (< 0: penetrating)
    foot_height: np.ndarray     # (2,) m, lowest point of each foot's spheres (left, right), signed
    foot_force: np.ndarray      # (2,) N, normal contact force of the floor on each foot (left, right)
    self_contacts: int = 0      # contacts between two of the robot's bodies (MuJoCo; the training simulator has none)


class MujocoPlant:
    def __init__(self, robot: RobotDescription, physics_hz: float = 1000.0):
        self.robot = robot
        self.core = PhysicsCore(robot, physics_hz)
        m = self.core.model
        self._root = int(m.jnt_qposadr[m.body_jntadr[robot.root_body]])
        self._root_dof = int(m.jnt_dofadr[m.body_jntadr[robot.root_body]])
        self._bodies = np.array([b for b in range(m.nbody) if b != 0 and m.body_rootid[b] == robot.root_body])
        self._feet = FootContacts(m, robot)
        self._foot_geoms = [np.array(robot.foot_geoms[side]) for side in ("left", "right")]
        self._foot_of_geom = np.full(m.ngeom, -1)
        for side, geoms in enumerate(self._foot_geoms):
            self._foot_of_geom[geoms] = side

    def reset(self, q: np.ndarray, qd: np.ndarray) -> None:
        """q (7 + n,): root position, quaternion, joints; qd (6 + n,): root linear velocity (world),
        angular velocity (root frame), joint rates."""
        d, r = self.core.data, self.robot
        mujoco.mj_resetData(self.core.model, d)
        d.qpos[self._root:self._root + 7] = q[:7]
        d.qpos[r.joint_qpos_adr] = q[7:]
        d.qvel[self._root_dof:self._root_dof + 6] = qd[:6]
        d.qvel[r.joint_dof_adr] = qd[6:]
        mujoco.mj_forward(self.core.model, d)

    def advance(self, target: np.ndarray, kp: np.ndarray, kd: np.ndarray, period_s: float) -> None:
        n = self.robot.num_joints
        self.core.apply(JointCommand(enabled=np.ones(n, bool), q=target, dq=np.zeros(n), tau=np.zeros(n), kp=kp, kd=kd))
        self.core.step(int(round(period_s / self.core.dt)))

    def state(self) -> PlantState:
        d, r = self.core.data, self.robot
        return PlantState(base_quat=d.qpos[self._root + 3:self._root + 7].copy(),
                          base_ang_vel=d.qvel[self._root_dof + 3:self._root_dof + 6].copy(),
                          joint_pos=d.qpos[r.joint_qpos_adr].copy(), joint_vel=d.qvel[r.joint_dof_adr].copy(),
                          root_height=float(d.qpos[self._root + 2]), body_pos=d.xpos[self._bodies].copy(),
                          contact_height=self._feet.distances(d), foot_height=self._foot_heights(),
                          foot_force=self._foot_forces(), self_contacts=self_contacts(self.core.model, d))

    def _foot_heights(self) -> np.ndarray:
        m, d = self.core.model, self.core.data
        return np.array([np.min(d.geom_xpos[g, 2] - m.geom_size[g, 0]) for g in self._foot_geoms])

    def _foot_forces(self) -> np.ndarray:
        """Normal force of each foot's contacts with the world (MuJoCo's contact frame: normal first)."""
        m, d = self.core.model, self.core.data
        out, wrench = np.zeros(2), np.zeros(6)
        for i in range(d.ncon):
            g1, g2 = d.contact.geom[i]
            side = max(self._foot_of_geom[g1], self._foot_of_geom[g2])
            if side >= 0 and min(m.geom_bodyid[g1], m.geom_bodyid[g2]) == 0:
                mujoco.mj_contactForce(m, d, i, wrench)
                out[side] += wrench[0]
        return out


class WarpPlant:
    """The training simulator as a policy was trained in (`SimConfig.from_contract`: its contract's
    contact stiffness and simulator settings; defaults for what an older contract does not record).
    `contact_fraction`: a sphere counts as in contact when its normal impulse exceeds this share of
    its part of the robot's weight impulse (m g h / nc); the smoothed contact pushes at any height."""

    def __init__(self, config: SimConfig, model_path=None, contact_fraction: float = 1e-3):
        self.model = Model.from_mujoco(model_path, device="cpu")
        self.config = config
        self.robot = self.model.robot
        self.sim = Simulator(self.model, 1, config)
        self.s0, self.s1 = self.sim.state(), self.sim.state()
        self.ctrl = self.sim.control()
        self._jq = self.model.joint_dof.numpy() + 1
        self._jv = self.model.joint_dof.numpy()
        weight = float(self.model.body_mass.numpy().sum()) * np.linalg.norm(self.model.gravity)
        self._force_threshold = contact_fraction * weight / self.model.nc
        self._impulse_threshold = np.inf   # no contact before the first step
        self._period_s = 1.0               # any: the impulses are zero before the first step

    def reset(self, q: np.ndarray, qd: np.ndarray) -> None:
        """Same layout as MujocoPlant.reset (joints in the robot description's order)."""
        qs, qds = np.zeros(self.model.nq), np.zeros(self.model.nv)
        qs[:7], qds[:6] = q[:7], qd[:6]
        qs[self._jq], qds[self._jv] = q[7:], qd[6:]
        self.s0.assign(qs, qds)
        self.s0.contact_impulse.zero_()
        self._impulse_threshold = np.inf

    def advance(self, target: np.ndarray, kp: np.ndarray, kd: np.ndarray, period_s: float) -> None:
        self.ctrl.set_pd(q_target=target, kp=kp, kd=kd)
        self.sim.step(self.s0, self.s1, self.ctrl, period_s)
        self.s0, self.s1 = self.s1, self.s0
        self._impulse_threshold = self._force_threshold * period_s / self.config.substeps
        self._period_s = period_s

    def state(self) -> PlantState:
        q, qd = self.s0.q.numpy()[0], self.s0.qd.numpy()[0]
        with torch.no_grad():
            pos, _ = body_frames(self.sim, torch.as_tensor(q[None]))
        normal = self.s0.contact_impulse.numpy()[0, :, 0]
        carrying = normal > self._impulse_threshold
        height = self.s0.contact_height.numpy()[0]
        leg = self.model.sphere_leg.numpy()
        h = self._period_s / self.config.substeps
        return PlantState(base_quat=q[3:7].copy(), base_ang_vel=qd[3:6].copy(), joint_pos=q[self._jq],
                          joint_vel=qd[self._jv], root_height=float(q[2]), body_pos=pos[0].numpy(),
                          contact_height=height[carrying],
                          foot_height=np.array([height[leg == side].min() for side in (0, 1)]),
                          foot_force=np.array([normal[leg == side].sum() / h for side in (0, 1)]))
