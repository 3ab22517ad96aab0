"""Safety checks on LowState and on the policy's output. Pure functions: a reason string or None.

Each returned reason names the check, the value and the limit, so the node's log says why it
went to damping.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np

from bcg.robot import SDK_JOINT_NAMES


@dataclass(frozen=True)
class SafetyLimits:
    max_joint_velocity: float = 35.0
    """rad/s; |dq| above it on any valid slot is a fault."""
    max_temperature: float = 90.0
    """deg C; a motor temperature at or above it is a fault."""
    motor_fault_mask: int = 0xFFFFFFFF
    """Bits of MotorState.motorstate that signal a motor fault."""
    stale_periods: float = 3.0
    """LowState older than this many policy periods is a fault."""


def _slot_name(slot: int) -> str:
    return SDK_JOINT_NAMES[slot] if slot < len(SDK_JOINT_NAMES) else f"slot {slot}"


def projected_gravity_z(quat_wxyz: np.ndarray) -> float:
    """z of the world's down vector in the base frame: -1 upright, > 0 upside down."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    n = w * w + x * x + y * y + z * z
    return -(1.0 - 2.0 * (x * x + y * y) / n) if n > 0 else float("nan")


def check_state(state: np.void, valid_slots: np.ndarray, limits: SafetyLimits) -> Optional[str]:
    """The first fault in a LowState record, or None."""
    imu, motors = state["imu_state"], state["motor_state"]
    for name in ("quaternion", "gyroscope"):
        if not np.all(np.isfinite(imu[name])):
            return f"non-finite IMU {name} in LowState: {imu[name].tolist()}"
    for name in ("q", "dq"):
        bad = np.flatnonzero(~np.isfinite(motors[name]) & valid_slots)
        if bad.size:
            return f"non-finite motor {name} in LowState on {_slot_name(bad[0])}"
    if not np.any(imu["quaternion"]):
        return "IMU quaternion is all zero"
    gz = projected_gravity_z(imu["quaternion"])
    if gz > 0:
        return f"base upside down: projected gravity z = {gz:.2f} > 0"
    dq = np.where(valid_slots, np.abs(motors["dq"]), 0.0)
    k = int(np.argmax(dq))
    if dq[k] > limits.max_joint_velocity:
        return f"|dq| = {dq[k]:.1f} rad/s on {_slot_name(k)} exceeds {limits.max_joint_velocity:g}"
    temp = np.where(valid_slots, motors["temperature"].max(axis=1), -1000)
    k = int(np.argmax(temp))
    if temp[k] >= limits.max_temperature:
        return f"motor temperature {temp[k]} C on {_slot_name(k)} >= {limits.max_temperature:g}"
    faults = np.flatnonzero(((motors["motorstate"] & np.uint32(limits.motor_fault_mask)) != 0) & valid_slots)
    if faults.size:
        return f"motor fault bits 0x{int(motors['motorstate'][faults[0]]):08x} on {_slot_name(faults[0])}"
    return None


def check_action(action: np.ndarray) -> Optional[str]:
    """A fault when the policy's output holds NaN or Inf."""
    bad = np.flatnonzero(~np.isfinite(action))
    if bad.size:
        return f"non-finite policy output at action index {int(bad[0])} ({action[bad[0]]})"
    return None


def check_stale(age_s: float, period_s: float, limits: SafetyLimits) -> Optional[str]:
    """A fault when the newest LowState is older than `stale_periods` policy periods."""
    limit = limits.stale_periods * period_s
    if age_s > limit:
        return f"LowState stale: newest is {age_s * 1e3:.0f} ms old (limit {limit * 1e3:.0f} ms)"
    return None
