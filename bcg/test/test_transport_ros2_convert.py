"""Record <-> ROS 2 message conversion of the ROS 2 transport, against stand-in message classes.

rclpy and unitree_ros2 are absent here; the stand-ins (`bcg.transport.ros2_standins`) are built
from unitree_ros2's ``unitree_hg/msg/*.msg`` field lists and enforce what rosidl-generated Python
classes enforce (Python int / float scalars, numpy arrays of the exact dtype and length, lists of
messages). Speed is `bench/bench_ros2_convert.py`'s, not tested here.
"""
import numpy as np
import pytest

from bcg.transport.ros2_convert import MessageFiller, message_to_record
from bcg.transport.ros2_standins import CLASSES
from bcg.wire import LOWCMD, LOWSTATE

FLOAT_FIELDS = {"LowCmd_": {"motor_cmd": ("q", "dq", "tau", "kp", "kd")},
                "LowState_": {"motor_state": ("q", "dq", "ddq", "tau_est", "vol"),
                              "imu_state": ("quaternion", "gyroscope", "accelerometer", "rpy")}}


def random_record(codec, rng):
    """Random bytes in every member, then finite floats (random bytes would make NaNs)."""
    rec = codec.new()
    raw = np.frombuffer(rng.bytes(codec.dtype.itemsize), codec.dtype)[0]
    for name in codec.dtype.names:
        rec[name] = raw[name]
    for group, fields in FLOAT_FIELDS[codec.idl_type.__name__].items():
        for field in fields:
            rec[group][field] = rng.normal(size=rec[group][field].shape)
    return rec


def checked(msg, struct_name: str) -> None:
    """Every member of `msg` passes its class's own setter (what rosidl checks before publishing)."""
    cls = CLASSES[struct_name]
    for member, kind, count in cls._fields:
        value = getattr(msg, member)
        setattr(msg, member, value)
        if kind in CLASSES:
            for sub in (value if count else [value]):
                checked(sub, kind)


@pytest.mark.parametrize("codec, msg_name", [(LOWCMD, "LowCmd"), (LOWSTATE, "LowState")])
def test_record_message_round_trip_is_bit_exact_through_one_refilled_message(codec, msg_name):
    rng = np.random.default_rng(3)
    filler = MessageFiller(CLASSES[msg_name](), codec)
    for k in range(5):
        rec = random_record(codec, rng)
        if k == 4:                         # extreme floats survive too
            group = "motor_cmd" if codec is LOWCMD else "motor_state"
            rec[group]["q"][:3] = [np.inf, -np.inf, np.finfo(np.float32).tiny / 4]
        rec["crc"] = codec.crc(rec)
        msg = filler.fill(rec)
        assert msg is filler.msg           # preallocated, refilled in place
        checked(msg, msg_name)
        back = message_to_record(msg, codec)
        assert codec.encode(back) == codec.encode(rec)
        assert codec.crc_ok(back)


def test_message_members_hold_the_record_values():
    rec = random_record(LOWSTATE, np.random.default_rng(4))
    msg = MessageFiller(CLASSES["LowState"](), LOWSTATE).fill(rec)
    assert msg.tick == int(rec["tick"]) and type(msg.tick) is int
    assert msg.motor_state[7].q == float(rec["motor_state"]["q"][7]) and type(msg.motor_state[7].q) is float
    np.testing.assert_array_equal(msg.motor_state[34].temperature,
                                  rec["motor_state"]["temperature"][34])
    np.testing.assert_array_equal(msg.imu_state.quaternion, rec["imu_state"]["quaternion"])
    np.testing.assert_array_equal(msg.wireless_remote, rec["wireless_remote"])
    rec["tick"] += 1                      # the message holds copies, not views of the record given
    rec["motor_state"]["sensor"][3] += 1
    assert msg.tick != int(rec["tick"])
    assert not np.array_equal(msg.motor_state[3].sensor, rec["motor_state"]["sensor"][3])


def test_a_message_received_as_bytes_arrays_converts():
    """rosidl may hand uint8 arrays over as bytes; they convert as the numpy array would."""
    rec = random_record(LOWSTATE, np.random.default_rng(5))
    msg = MessageFiller(CLASSES["LowState"](), LOWSTATE).fill(rec)
    msg._wireless_remote = bytes(msg.wireless_remote)
    assert LOWSTATE.encode(message_to_record(msg, LOWSTATE)) == LOWSTATE.encode(rec)


def test_message_with_wrong_array_length_is_refused():
    msg = CLASSES["LowCmd"]()
    msg._motor_cmd = msg.motor_cmd[:29]
    with pytest.raises(ValueError, match="LowCmd_.motor_cmd: 29 items, expected 35"):
        message_to_record(msg, LOWCMD)


def test_ros2_transport_imports_without_rclpy():
    import bcg.transport.ros2 as ros2
    assert ros2.LOWCMD_ROS_TOPIC == "/lowcmd" and ros2.LOWSTATE_ROS_TOPIC == "/lowstate"
