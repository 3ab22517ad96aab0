"""The motor command the physics core applies: per-joint arrays in the robot description's joint order."""
from dataclasses import dataclass

import numpy as np


@dataclass
class JointCommand:
    """One motor command per joint; every array is (num_joints,), float64 unless stated.

    The motor torque of an enabled joint is `tau + kp (q - q_meas) + kd (dq - dq_meas)`, clamped to
    the joint's torque limit; a disabled joint gets zero torque.
    """

    enabled: np.ndarray  # bool: motor mode 1
    q: np.ndarray        # rad, position target
    dq: np.ndarray       # rad/s, velocity target
    tau: np.ndarray      # N m, feed-forward torque
    kp: np.ndarray       # N m/rad
    kd: np.ndarray       # N m s/rad

    @classmethod
    def damping(cls, num_joints: int, kd: float) -> "JointCommand":
        """Every motor enabled with kp = 0, dq = 0, tau = 0 and the given kd: the robot's damping mode."""
        zeros = np.zeros(num_joints)
        return cls(enabled=np.ones(num_joints, dtype=bool), q=zeros.copy(), dq=zeros.copy(),
                   tau=zeros.copy(), kp=zeros.copy(), kd=np.full(num_joints, float(kd)))

    @classmethod
    def from_motor_cmd(cls, motor_cmd: np.ndarray, motor_slots: np.ndarray) -> "JointCommand":
        """From a LowCmd's `motor_cmd` records (35,), picking each joint's SDK slot."""
        m = motor_cmd[motor_slots]
        return cls(enabled=m["mode"] == 1, q=m["q"].astype(float), dq=m["dq"].astype(float),
                   tau=m["tau"].astype(float), kp=m["kp"].astype(float), kd=m["kd"].astype(float))
