"""The physics core: the G1 in MuJoCo with the motor PD law evaluated inside every physics step.

The PD law runs inside MuJoCo itself: each robot actuator is made an affine actuator
`force = ctrl - kp * q - kd * dq` with `ctrl = tau + kp * q_cmd + kd * dq_cmd`, force-limited to the
joint's torque limit. MuJoCo evaluates it from the current q, dq at every `mj_step`, exactly
`clamp(tau + kp (q_cmd - q) + kd (dq_cmd - dq))`, however many steps run between two commands.
No DDS, no clock, no files here.
"""
import mujoco
import numpy as np

from bcg.robot import RobotDescription

from .indexing import as_slice_if_contiguous
from .joint_command import JointCommand


class PhysicsCore:
    """A MuJoCo G1 stepped at `physics_hz` under a `JointCommand`.

    Attributes: `robot` (RobotDescription), `model` / `data` (MuJoCo), `dt` (s).
    """

    def __init__(self, robot: RobotDescription, physics_hz: float, initial_pose: str = "default"):
        self.robot = robot
        self.model = mujoco.MjModel.from_xml_path(str(robot.model_path))
        self.model.opt.timestep = 1.0 / float(physics_hz)
        self.dt = self.model.opt.timestep
        self.data = mujoco.MjData(self.model)
        self._act = as_slice_if_contiguous(robot.actuator_ids)
        self._qadr = as_slice_if_contiguous(robot.joint_qpos_adr)
        self._vadr = as_slice_if_contiguous(robot.joint_dof_adr)
        self._root_qadr = int(self.model.jnt_qposadr[self.model.body_jntadr[robot.root_body]])
        self._make_pd_actuators()
        if initial_pose == "default":
            self.data.qpos[self._qadr] = robot.default_q
        elif initial_pose != "zero":
            raise ValueError(f"initial_pose: {initial_pose!r} is not 'default' or 'zero'")
        self.command = JointCommand.damping(robot.num_joints, 0.0)
        self.apply(self.command)
        mujoco.mj_forward(self.model, self.data)

    def _make_pd_actuators(self) -> None:
        m, a = self.model, self._act
        if np.any(m.actuator_dyntype[a] != mujoco.mjtDyn.mjDYN_NONE):
            raise ValueError(f"{self.robot.model_path}: robot actuators must have no activation dynamics")
        m.actuator_gaintype[a] = mujoco.mjtGain.mjGAIN_FIXED
        m.actuator_gainprm[a] = 0.0
        m.actuator_gainprm[a, 0] = 1.0
        m.actuator_biastype[a] = mujoco.mjtBias.mjBIAS_AFFINE
        m.actuator_biasprm[a] = 0.0
        m.actuator_ctrllimited[a] = 0
        m.actuator_forcelimited[a] = 1
        m.actuator_forcerange[a, 0] = -self.robot.tau_limit
        m.actuator_forcerange[a, 1] = self.robot.tau_limit
        if np.any(m.actuator_gear[a, 0] != 1.0):
            raise ValueError(f"{self.robot.model_path}: robot actuators must have gear 1 (joint torque = force)")

    def apply(self, command: JointCommand) -> None:
        """Use `command` from the next physics step on, until the next `apply`."""
        on = command.enabled
        kp = np.where(on, command.kp, 0.0)
        kd = np.where(on, command.kd, 0.0)
        self.data.ctrl[self._act] = np.where(on, command.tau + kp * command.q + kd * command.dq, 0.0)
        self.model.actuator_biasprm[self._act, 1] = -kp
        self.model.actuator_biasprm[self._act, 2] = -kd
        self.command = command

    def step(self, nstep: int = 1) -> None:
        """Advance `nstep` physics steps (dt each), the PD law evaluated in every one."""
        mujoco.mj_step(self.model, self.data, nstep)

    @property
    def time(self) -> float:
        """Simulated time, s."""
        return float(self.data.time)

    @property
    def joint_q(self) -> np.ndarray:
        """(num_joints,) rad, joint positions (a copy)."""
        return self.data.qpos[self._qadr].copy()

    @property
    def joint_dq(self) -> np.ndarray:
        """(num_joints,) rad/s, joint velocities (a copy)."""
        return self.data.qvel[self._vadr].copy()

    @property
    def joint_torque(self) -> np.ndarray:
        """(num_joints,) N m, the torque applied in the last step (after clamping; a copy)."""
        return self.data.actuator_force[self._act].copy()

    @property
    def root_height(self) -> float:
        """Height of the root (pelvis) above the world origin, m (the free joint's z)."""
        return float(self.data.qpos[self._root_qadr + 2])
