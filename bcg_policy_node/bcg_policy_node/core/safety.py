"""Safety checks on LowState and on the policy's output. Pure functions: a reason string or None.

Each returned reason names the check, the value and the limit, so the node's log says why it
went to damping.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np

from bcg.robot import SDK_JOINT_NAMES
from bcg.rotations import projected_gravity


@dataclass(frozen=True)
class SafetyLimits:
    max_joint_velocity: float = 35.0
    """rad/s; |dq| above it on any valid slot is a fault."""
    max_temperature: float = 90.0
    """deg C; a motor temperature at or above it is a fault."""
    motor_fault_mask: int = 0xFFFFFFFF
    """Bits of MotorState.motorstate that signal a motor fault."""
    stale_limit_s: float = 0.06
    """s: LowState older than this is a fault."""


MOTOR_FAULT_BITS = {
    0x1: "overcurrent", 0x2: "transient overvoltage", 0x4: "sustained overvoltage", 0x8: "transient undervoltage",
    0x10: "chip overheating", 0x20: "MOS overheating", 0x40: "MOS temperature anomaly", 0x80: "shell overheating",
    0x100: "shell temperature anomaly", 0x200: "winding overheating", 0x400: "rotor encoder 1 error",
    0x800: "rotor encoder 2 error", 0x1000: "output encoder error", 0x2000: "calibration / boot data error",
    0x4000: "abnormal reset", 0x8000: "motor locked"}
"""What each bit of MotorState.motorstate means (Unitree's G1 developer documentation, "common mistakes
and definitions": motor status information). Higher bits are undocumented; the default fault mask
counts them too."""


def motor_fault_names(bits: int) -> str:
    """The documented meanings of `bits`, e.g. 'chip overheating, motor locked' ('undocumented bits' for the rest)."""
    names = [name for bit, name in MOTOR_FAULT_BITS.items() if bits & bit]
    if bits & ~0xFFFF:
        names.append("undocumented bits")
    return ", ".join(names)


def _slot_name(slot: int) -> str:
    return SDK_JOINT_NAMES[slot] if slot < len(SDK_JOINT_NAMES) else f"slot {slot}"


def projected_gravity_z(quat_wxyz: np.ndarray) -> float:
    """z of the world's down vector in the base frame (`bcg.rotations.projected_gravity` of the
    normalised quaternion): -1 upright, > 0 upside down; NaN for a zero quaternion."""
    q = np.asarray(quat_wxyz, dtype=float)
    n = float(np.linalg.norm(q))
    return float(projected_gravity(q / n)[2]) if n > 0 else float("nan")


QUATERNION_NORM_TOLERANCE = 0.05
"""|norm - 1| of the IMU quaternion above which a LowState is not yet valid (start-up only)."""


def check_finite(state: np.void, valid: np.ndarray) -> Optional[str]:
    """A reason when the IMU or a valid slot's q / dq holds NaN or Inf, else None."""
    imu, motors = state["imu_state"], state["motor_state"]
    quat, gyro = imu["quaternion"], imu["gyroscope"]
    q, dq = motors["q"][valid], motors["dq"][valid]
    if np.isfinite(quat.sum(dtype=np.float64) + gyro.sum(dtype=np.float64) + q.sum(dtype=np.float64)
                   + dq.sum(dtype=np.float64)):
        return None
    for name, values, slots in (("IMU quaternion", quat, None), ("IMU gyroscope", gyro, None),
                                ("motor q", q, valid), ("motor dq", dq, valid)):
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size and slots is None:
            return f"non-finite {name} in LowState: {values.tolist()}"
        if bad.size:
            return f"non-finite {name} in LowState on {_slot_name(slots[bad[0]])}"
    return None


def check_ready(state: np.void, valid: np.ndarray) -> Optional[str]:
    """A reason when a (finite) LowState is not yet a robot's: a zero or non-unit IMU quaternion, or
    every valid joint at exactly 0 with tick 0 (Unitree's simulator before its first physics step);
    None when it is. Judged only before the node has commanded motion (`Controller.on_state`)."""
    quat = state["imu_state"]["quaternion"].astype(np.float64)
    norm = float(np.sqrt(quat @ quat))
    if norm == 0.0:
        return "IMU quaternion is all zero"
    if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
        return f"IMU quaternion is not a unit quaternion (norm {norm:.3f})"
    if int(state["tick"]) == 0 and not state["motor_state"]["q"][valid].any():
        return "every joint at 0 with tick 0"
    return None


def check_state(state: np.void, valid: np.ndarray, limits: SafetyLimits) -> Optional[str]:
    """The first fault in a LowState record, or None. `valid` (k,) int: the SDK slots the robot drives.

    Runs on every LowState (500 Hz), so it reads each field once, on the valid slots only.
    """
    reason = check_finite(state, valid)
    if reason is not None:
        return reason
    imu, motors = state["imu_state"], state["motor_state"]
    quat, dq = imu["quaternion"], motors["dq"][valid]
    gz = projected_gravity_z(quat)
    if not gz <= 0:
        return ("IMU quaternion is all zero" if not np.any(quat)
                else f"base upside down: tilted {np.degrees(np.arccos(max(-1.0, min(1.0, -gz)))):.1f} deg from "
                     f"upright, more than 90 (projected gravity z = {gz:.3g}, > 0)")
    speed = np.abs(dq)
    k = int(np.argmax(speed))
    if speed[k] > limits.max_joint_velocity:
        return f"|dq| = {speed[k]:.1f} rad/s on {_slot_name(valid[k])} exceeds {limits.max_joint_velocity:g}"
    temp = motors["temperature"][valid].max(axis=1)
    k = int(np.argmax(temp))
    if temp[k] >= limits.max_temperature:
        return f"motor temperature {temp[k]} C on {_slot_name(valid[k])} >= {limits.max_temperature:g}"
    faults = np.flatnonzero(motors["motorstate"][valid] & np.uint32(limits.motor_fault_mask))
    if faults.size:
        slot = valid[faults[0]]
        bits = int(motors["motorstate"][slot])
        return f"motor fault bits 0x{bits:08x} ({motor_fault_names(bits)}) on {_slot_name(slot)}"
    return None


def check_action(action: np.ndarray) -> Optional[str]:
    """A fault when the policy's output holds NaN or Inf."""
    bad = np.flatnonzero(~np.isfinite(action))
    if bad.size:
        return f"non-finite policy output at action index {int(bad[0])} ({action[bad[0]]})"
    return None


def check_stale(age_s: float, limit_s: float) -> Optional[str]:
    """A fault when the newest LowState is `age_s` old, more than `limit_s` (`SafetyLimits.stale_limit_s`)."""
    if age_s > limit_s:
        return f"LowState stale: newest is {age_s * 1e3:.0f} ms old (limit {limit_s * 1e3:.0f} ms)"
    return None


def check_lockstep_silence(silent_s: float, limit_s: float) -> Optional[str]:
    """A fault when no LowState has come for `silent_s` wall seconds in lockstep, more than `limit_s`:
    there simulated time only moves with the simulator, so its silence is the simulator stopping."""
    if silent_s > limit_s:
        return (f"LowState stale: none for {silent_s:.1f} s of wall time in lockstep (limit {limit_s:g} s): "
                "did the simulator stop?")
    return None
