"""Unitree's MuJoCo simulator (unitree_mujoco's `simulate_python`), emulated on this bridge's physics.

What that simulator does, as measured against it (and read in its bridge, `unitree_sdk2py_bridge.py`),
and what `BridgeConfig.emulate = 'unitree_mujoco'` therefore does instead of behaving like the robot:
- every LowState carries crc 0, mode_machine 0, tick 0, motor modes 0 (`LowStateFiller(as_robot=False)`,
  a LowState writer without CRC; in lockstep, which that simulator does not have, the tick counts ms);
- it publishes before its first physics step: `PRESTEP_STATES` all-zero LowStates (IMU quaternion
  0, every q 0) come first;
- it applies zero torque until the first LowCmd arrives, and it validates nothing (no CRC, no
  mode_machine, no timeout: the last torque stays);
- it computes the PD law itself, once per received LowCmd, from the sensors of the last physics step
  (`data.sensordata` as `mj_step` left it: the state at the start of that step, one step old), and
  holds that torque (clamped to the motor's range) over the next step (`ExplicitPdCommands`), at
  its step length SIMULATE_DT (5 ms by default; `physics_hz` here, with one LowState per step).
Unitree's elastic band is this bridge's band in 'hang' mode (`--elastic-band --band-mode hang`).
"""
from typing import Dict, Optional

import mujoco
import numpy as np

from bcg.mujoco_plant import JointCommand
from bcg.robot import RobotDescription

from .command_gate import REJECT_REASONS
from .lowstate_fill import joint_sensor_index

PRESTEP_STATES = 80
"""All-zero LowStates Unitree's simulator publishes before its first physics step (measured: about 80)."""


class ExplicitPdCommands:
    """The command path of Unitree's simulator, with the interface of `CommandGate`.

    Each offered LowCmd sets the torque `tau + kp (q - q_s) + kd (dq - dq_s)` per joint (the motor
    slot's command, whatever its mode), q_s / dq_s the joint sensors of the last physics step; that
    torque is held, clamped by the physics core to the joint's limit, until the next LowCmd.
    Before the first one: zero torque.
    """

    def __init__(self, robot: RobotDescription, model: mujoco.MjModel, data: mujoco.MjData):
        self._slots, self._data = robot.motor_slots, data
        self._q = joint_sensor_index(model, robot.joint_names, "pos")
        self._dq = joint_sensor_index(model, robot.joint_names, "vel")
        self._command = JointCommand.damping(robot.num_joints, 0.0)      # kd 0: zero torque
        self.accepted = 0
        self.rejected: Dict[str, int] = dict.fromkeys(REJECT_REASONS, 0)
        """Always zero: Unitree's simulator validates nothing."""
        self.timeouts = 0
        """Always zero: the last torque stays however old the command is."""

    def offer(self, rec: np.void, now: float) -> Optional[str]:
        m = rec["motor_cmd"][self._slots]
        sensors = self._data.sensordata
        torque = (m["tau"].astype(float) + m["kp"] * (m["q"] - sensors[self._q]) +
                  m["kd"] * (m["dq"] - sensors[self._dq]))
        zeros = np.zeros(len(self._slots))
        self._command = JointCommand(enabled=np.ones(len(self._slots), bool), q=zeros, dq=zeros.copy(),
                                     tau=torque, kp=zeros.copy(), kd=zeros.copy())
        self.accepted += 1
        return None

    def command(self, now: float) -> JointCommand:
        return self._command
