"""Policy joints -> SDK motor slots, by name, for the robot variant actually connected.

The 23-DoF model lacks six joints (its `valid_slots` say which); a locked-waist 29-DoF robot
(mode_machine 6) drives the 29-DoF model but its waist roll / pitch slots are invalid. A policy
that needs a joint the robot cannot drive is refused, and so is a robot whose `mode_machine` is
unknown or does not match the model.
"""
from dataclasses import dataclass

import numpy as np

from bcg.contract import stand_gains
from bcg.robot import MODE_MACHINE, NUM_MOTOR_SLOTS, SDK_JOINT_NAMES

LOCKED_SLOTS = {6: (SDK_JOINT_NAMES.index("waist_roll_joint"), SDK_JOINT_NAMES.index("waist_pitch_joint"))}
"""mode_machine -> SDK slots that variant locks although the 29-DoF model has them."""
VARIANT_JOINTS = dict(sorted([(mode, joints) for joints, mode in MODE_MACHINE.items()] +
                             [(mode, 29) for mode in LOCKED_SLOTS]))
"""mode_machine -> joints of the robot model that G1 variant needs (4: 23-DoF, 5: 29-DoF rev 1.0,
6: 29-DoF with locked waist). Any other value is refused: the node never commands a robot it
does not know. Except 0, which no robot reports: Unitree's Python simulator leaves it unset (the
model then stands for the robot)."""
UNSET_MODE_MACHINE = 0


class JointMapError(ValueError):
    """The policy names joints the robot does not have or cannot drive."""


@dataclass(frozen=True)
class JointMap:
    """Where each policy joint sits on the wire, and what the robot's other joints do.

    `slots` (n,) are the policy joints' SDK slots; `valid_slots` (35,) bool and `valid_index` (k,)
    int the slots the robot drives. Slot-space arrays below are (35,), zero where no joint drives the slot.
    """

    joint_names: tuple
    slots: np.ndarray
    valid_slots: np.ndarray
    valid_index: np.ndarray
    q_lower: np.ndarray       # (35,) rad, joint limits per slot
    q_upper: np.ndarray       # (35,) rad
    default_q: np.ndarray     # (35,) rad: the robot's default pose; policy joints: the contract's
    kp: np.ndarray            # (35,) N m/rad: robot gains; policy joints: the contract's
    kd: np.ndarray            # (35,) N m s/rad
    hold_kp: np.ndarray       # (35,) N m/rad: gains that hold the robot standing (the stand policy's, every joint)
    hold_kd: np.ndarray       # (35,) N m s/rad

    @classmethod
    def build(cls, contract, robot, mode_machine=None) -> "JointMap":
        """Map `contract` (PolicyContract) onto `robot` (RobotDescription); `mode_machine` from LowState."""
        if mode_machine is not None and int(mode_machine) != UNSET_MODE_MACHINE:
            joints = VARIANT_JOINTS.get(int(mode_machine))
            if joints is None:
                known = ", ".join(f"{k} ({v}-DoF{', locked waist' if k in LOCKED_SLOTS else ''})"
                                  for k, v in VARIANT_JOINTS.items())
                raise JointMapError(f"mode_machine {mode_machine}: not a G1 variant this node knows ({known})")
            if joints != robot.num_joints:
                raise JointMapError(f"mode_machine {mode_machine}: the robot is a {joints}-DoF G1 but the robot model "
                                    f"{robot.model_path} has {robot.num_joints} joints; start the node with the "
                                    f"{joints}-DoF model (--model)")
        valid = np.array(robot.valid_slots, bool).copy()
        valid[list(LOCKED_SLOTS.get(int(mode_machine) if mode_machine is not None else -1, ()))] = False
        missing = [j for j in contract.joint_names if j not in robot.joint_names]
        if missing:
            raise JointMapError(f"joint_names: the robot model {robot.model_path} has no joint(s) {missing}")
        slots = np.array([SDK_JOINT_NAMES.index(j) for j in contract.joint_names], int)
        locked = [j for j, s in zip(contract.joint_names, slots) if not valid[s]]
        if locked:
            raise JointMapError(f"joint_names: the robot (mode_machine {mode_machine}) cannot drive {locked}")

        def per_slot(robot_values, contract_values=None):
            out = np.zeros(NUM_MOTOR_SLOTS)
            out[robot.motor_slots] = robot_values
            if contract_values is not None:
                out[slots] = contract_values
            out[~valid] = 0.0
            return out
        hold_kp, hold_kd = stand_gains(robot)
        return cls(tuple(contract.joint_names), slots, valid, np.flatnonzero(valid), per_slot(robot.q_lower),
                   per_slot(robot.q_upper), per_slot(robot.default_q, contract.default_joint_pos),
                   per_slot(robot.kp, contract.kp), per_slot(robot.kd, contract.kd), per_slot(hold_kp),
                   per_slot(hold_kd))

    def clip(self, q_slots: np.ndarray) -> np.ndarray:
        """Targets (35,) clipped to the joint limits (invalid slots stay 0)."""
        return np.clip(q_slots, self.q_lower, self.q_upper)
