"""Which LowCmd the motors obey: validation as the robot does it, and the damping fallback.

A LowCmd is rejected (counted by reason, never applied) when its CRC is wrong, its
`mode_machine` is not the robot's, or any float field of any motor slot is not finite. Without
an accepted command for `timeout_s` (simulated seconds), and before the first one, the motors damp:
kp = 0, kd = `damping_kd`, tau = 0.
"""
from typing import Dict, Optional

import numpy as np

from bcg.mujoco_plant import JointCommand
from bcg.robot import RobotDescription
from bcg.wire import crc_ok

REJECT_REASONS = ("crc", "mode_machine", "non_finite")
"""Why a LowCmd was rejected, in the order the checks run."""
_FLOAT_FIELDS = ("q", "dq", "tau", "kp", "kd")


class CommandGate:
    """Accepts or rejects LowCmd records and says which `JointCommand` is in force at a time."""

    def __init__(self, robot: RobotDescription, timeout_s: float, damping_kd: float):
        self._slots = robot.motor_slots
        self._mode_machine = robot.mode_machine
        self.timeout_s = float(timeout_s)
        self.damping = JointCommand.damping(robot.num_joints, damping_kd)
        """The command in force without a recent accepted LowCmd."""
        self.accepted = 0
        self.rejected: Dict[str, int] = dict.fromkeys(REJECT_REASONS, 0)
        self.timeouts = 0
        """How often the bridge fell back to damping after having accepted commands."""
        self._latest: Optional[JointCommand] = None
        self._accepted_at = -np.inf
        self._timed_out = True

    def rejection(self, rec: np.void) -> Optional[str]:
        """The reason (one of REJECT_REASONS) `rec` must be rejected, or None when it is valid."""
        if not crc_ok(rec):
            return "crc"
        if int(rec["mode_machine"]) != self._mode_machine:
            return "mode_machine"
        motors = rec["motor_cmd"]
        if not all(np.isfinite(motors[f]).all() for f in _FLOAT_FIELDS):
            return "non_finite"
        return None

    def offer(self, rec: np.void, now: float) -> Optional[str]:
        """Validate `rec`, received at simulated time `now` (s); accept it or count its rejection.

        Returns the rejection reason, or None when accepted.
        """
        reason = self.rejection(rec)
        if reason is not None:
            self.rejected[reason] += 1
            return reason
        self._latest = JointCommand.from_motor_cmd(rec["motor_cmd"], self._slots)
        self._accepted_at = now
        self._timed_out = False
        self.accepted += 1
        return None

    def command(self, now: float) -> JointCommand:
        """The command in force at simulated time `now` (s): the latest accepted one, or damping."""
        if now - self._accepted_at <= self.timeout_s + 1e-12:
            return self._latest
        if not self._timed_out:
            self._timed_out = True
            self.timeouts += 1
        return self.damping
