"""The G1's low-level messages as Cyclone DDS IDL types (package ``unitree_hg`` of unitree_sdk2).

Field names, types and order are those of unitree_sdk2_python's ``unitree_hg.msg.dds_`` types;
the type names on the wire are ``unitree_hg::msg::dds_::LowCmd_`` etc. These classes are the one
source of truth for the message layout: ``bcg.wire.layout`` derives the fast codec's numpy
layouts from their annotations.
"""
from dataclasses import dataclass

import cyclonedds.idl as idl
import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types

LOWCMD_TOPIC = "rt/lowcmd"
"""DDS topic of LowCmd_ (host -> robot); ROS 2 sees it as /lowcmd."""
LOWSTATE_TOPIC = "rt/lowstate"
"""DDS topic of LowState_ (robot -> host, 500 Hz); ROS 2 sees it as /lowstate."""
NUM_MOTORS = 35
"""Motor slots in every unitree_hg message (29 used on the 29-DoF G1)."""


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.MotorCmd_"):
    """One motor's command: torque = tau + kp (q - q_meas) + kd (dq - dq_meas)."""
    mode: types.uint8
    q: types.float32
    dq: types.float32
    tau: types.float32
    kp: types.float32
    kd: types.float32
    reserve: types.uint32


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.LowCmd_"):
    """Host -> robot command of all 35 motor slots."""
    mode_pr: types.uint8
    mode_machine: types.uint8
    motor_cmd: types.array[MotorCmd_, NUM_MOTORS]
    reserve: types.array[types.uint32, 4]
    crc: types.uint32


@dataclass
@annotate.final
@annotate.autoid("sequential")
class IMUState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.IMUState_"):
    """Pelvis IMU: quaternion (w, x, y, z), gyroscope rad/s, accelerometer m/s^2, rpy rad."""
    quaternion: types.array[types.float32, 4]
    gyroscope: types.array[types.float32, 3]
    accelerometer: types.array[types.float32, 3]
    rpy: types.array[types.float32, 3]
    temperature: types.int16


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.MotorState_"):
    """One motor's state: q rad, dq rad/s, ddq rad/s^2, tau_est N m, temperature C, vol V."""
    mode: types.uint8
    q: types.float32
    dq: types.float32
    ddq: types.float32
    tau_est: types.float32
    temperature: types.array[types.int16, 2]
    vol: types.float32
    sensor: types.array[types.uint32, 2]
    motorstate: types.uint32
    reserve: types.array[types.uint32, 4]


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.LowState_"):
    """Robot -> host state of all 35 motor slots, the pelvis IMU and the remote controller."""
    version: types.array[types.uint32, 2]
    mode_pr: types.uint8
    mode_machine: types.uint8
    tick: types.uint32
    imu_state: IMUState_
    motor_state: types.array[MotorState_, NUM_MOTORS]
    wireless_remote: types.array[types.uint8, 40]
    reserve: types.array[types.uint32, 4]
    crc: types.uint32
