"""Fills a LowState record from the model's sensors, as the robot reports itself.

Sensor addresses are looked up by name (`<joint>_pos`, `<joint>_vel`, `<joint>_torque` for each
joint without its `_joint` suffix, then `imu_quat`, `imu_gyro`, `imu_acc`), never by offset.
"""
import math

import mujoco
import numpy as np

from bcg.mujoco_plant.indexing import as_slice_if_contiguous
from bcg.robot import RobotDescription


class SensorError(ValueError):
    """The model lacks a sensor the LowState needs."""


def _sensor_index(model: mujoco.MjModel, name: str, dim: int) -> np.ndarray:
    """Indices into `sensordata` of sensor `name`, which must have `dim` values."""
    sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
    if sid < 0:
        raise SensorError(f"model has no sensor named {name!r} (needed for LowState)")
    if model.sensor_dim[sid] != dim:
        raise SensorError(f"sensor {name!r} has {model.sensor_dim[sid]} values, expected {dim}")
    adr = int(model.sensor_adr[sid])
    return np.arange(adr, adr + dim)


def joint_sensor_index(model: mujoco.MjModel, joint_names, suffix: str):
    """Index (slice when contiguous) into `sensordata` of `<joint>_<suffix>` for every joint."""
    base = [n[:-len("_joint")] if n.endswith("_joint") else n for n in joint_names]
    return as_slice_if_contiguous(np.concatenate([_sensor_index(model, f"{b}_{suffix}", 1) for b in base]))


def quat_to_rpy(q_wxyz) -> np.ndarray:
    """(3,) roll, pitch, yaw (rad, intrinsic Z-Y-X as the robot's IMU) of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q_wxyz.tolist() if isinstance(q_wxyz, np.ndarray) else q_wxyz
    return np.array([math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y)),
                     math.asin(max(-1.0, min(1.0, 2.0 * (w * y - z * x)))),
                     math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))])


class LowStateFiller:
    """Writes the simulated robot's state into one LowState record (`bcg.wire.new_lowstate()`).

    Unused motor slots keep what the record holds (zeros for a fresh one); `mode` is 1 on the
    driven slots. The CRC is left to the writer. `as_robot` False fills only what Unitree's MuJoCo
    simulator fills (joint q / dq / tau_est, IMU quaternion / gyroscope / accelerometer):
    `mode_machine`, motor modes and rpy stay 0, and `tick` too unless `tick` (lockstep needs it).
    """

    def __init__(self, model: mujoco.MjModel, robot: RobotDescription, rec: np.void, as_robot: bool = True,
                 tick: bool = True):
        self.rec, self.as_robot, self.tick = rec, as_robot, tick
        self._q = joint_sensor_index(model, robot.joint_names, "pos")
        self._dq = joint_sensor_index(model, robot.joint_names, "vel")
        self._tau = joint_sensor_index(model, robot.joint_names, "torque")
        self._quat = as_slice_if_contiguous(_sensor_index(model, "imu_quat", 4))
        self._gyro = as_slice_if_contiguous(_sensor_index(model, "imu_gyro", 3))
        self._acc = as_slice_if_contiguous(_sensor_index(model, "imu_acc", 3))
        slots = as_slice_if_contiguous(robot.motor_slots)
        motors, imu = rec["motor_state"], rec["imu_state"]
        if as_robot:
            motors["mode"][slots] = 1
            rec["mode_machine"] = robot.mode_machine
        self._views = ((motors["q"], slots, self._q), (motors["dq"], slots, self._dq),
                       (motors["tau_est"], slots, self._tau), (imu["quaternion"], slice(None), self._quat),
                       (imu["gyroscope"], slice(None), self._gyro), (imu["accelerometer"], slice(None), self._acc))
        self._rpy = imu["rpy"]

    def fill(self, data: mujoco.MjData) -> np.void:
        """Set tick (ms of simulated time), IMU and motor states from `data`; returns the record."""
        sd = data.sensordata
        for view, where, source in self._views:
            view[where] = sd[source]
        if self.tick:
            self.rec["tick"] = int(round(data.time * 1000.0)) & 0xFFFFFFFF
        if self.as_robot:
            self._rpy[:] = quat_to_rpy(sd[self._quat])
        return self.rec
