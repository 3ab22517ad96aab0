"""Record <-> ROS 2 message conversion of the ROS 2 transport, against stand-in message classes.

rclpy and unitree_ros2 are absent here; the stand-ins are built from unitree_ros2's
``unitree_hg/msg/*.msg`` field lists and enforce what rosidl-generated Python classes enforce
(Python int / float scalars, numpy arrays of the exact dtype and length, lists of messages).
"""
import numpy as np
import pytest

from bcg.transport.ros2_convert import message_to_record, record_to_message
from bcg.wire import LOWCMD, LOWSTATE

MSG_FILES = {
    "MotorCmd": "uint8 mode\nfloat32 q\nfloat32 dq\nfloat32 tau\nfloat32 kp\nfloat32 kd\n"
                "uint32 reserve",
    "LowCmd": "uint8 mode_pr\nuint8 mode_machine\nMotorCmd[35] motor_cmd\nuint32[4] reserve\n"
              "uint32 crc",
    "IMUState": "float32[4] quaternion\nfloat32[3] gyroscope\nfloat32[3] accelerometer\n"
                "float32[3] rpy\nint16 temperature",
    "MotorState": "uint8 mode\nfloat32 q\nfloat32 dq\nfloat32 ddq\nfloat32 tau_est\n"
                  "int16[2] temperature\nfloat32 vol\nuint32[2] sensor\nuint32 motorstate\n"
                  "uint32[4] reserve",
    "LowState": "uint32[2] version\nuint8 mode_pr\nuint8 mode_machine\nuint32 tick\n"
                "IMUState imu_state\nMotorState[35] motor_state\nuint8[40] wireless_remote\n"
                "uint32[4] reserve\nuint32 crc",
}
NUMPY = {"uint8": np.uint8, "int16": np.int16, "uint32": np.uint32, "float32": np.float32}
CLASSES = {}


def _field(name, kind, count):
    slot = "_" + name

    def check(value):
        if kind in CLASSES:
            assert isinstance(value, CLASSES[kind]), f"{name}: not a {kind}"
        elif kind == "float32":
            assert isinstance(value, float), f"{name}: {type(value)} is not float"
        else:
            info = np.iinfo(NUMPY[kind])
            assert isinstance(value, int) and info.min <= value <= info.max, \
                f"{name}: {value!r} is not a {kind}"

    def setter(self, value):
        if not count:
            check(value)
        elif kind in CLASSES:
            assert isinstance(value, list) and len(value) == count, name
            for item in value:
                check(item)
        elif isinstance(value, np.ndarray):
            assert value.dtype == NUMPY[kind] and value.size == count, f"{name}: {value.dtype}"
        else:
            value = np.array(value, dtype=NUMPY[kind])
            assert value.shape == (count,), name
        setattr(self, slot, value)

    return slot, property(lambda self: getattr(self, slot), setter)


def _default(kind, count):
    if kind in CLASSES:
        return [CLASSES[kind]() for _ in range(count)] if count else CLASSES[kind]()
    if count:
        return np.zeros(count, NUMPY[kind])
    return 0.0 if kind == "float32" else 0


def build_class(name, text):
    fields = []
    for line in text.splitlines():
        kind, member = line.split()
        count = int(kind[kind.index("[") + 1:-1]) if "[" in kind else 0
        fields.append((member, kind.split("[")[0], count))
    namespace = {"__slots__": [], "_fields": fields}
    for member, kind, count in fields:
        slot, prop = _field(member, kind, count)
        namespace["__slots__"].append(slot)
        namespace[member] = prop

    def __init__(self):
        for member, kind, count in fields:
            setattr(self, member, _default(kind, count))

    namespace["__init__"] = __init__
    CLASSES[name] = type(name, (), namespace)


for _name, _text in MSG_FILES.items():
    build_class(_name, _text)


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


@pytest.mark.parametrize("codec, msg_name", [(LOWCMD, "LowCmd"), (LOWSTATE, "LowState")])
def test_record_message_round_trip(codec, msg_name):
    rng = np.random.default_rng(3)
    for _ in range(5):
        rec = random_record(codec, rng)
        rec["crc"] = codec.crc(rec)
        msg = CLASSES[msg_name]()
        record_to_message(rec, codec, msg)
        back = message_to_record(msg, codec)
        assert codec.encode(back) == codec.encode(rec)
        assert codec.crc_ok(back)


def test_message_members_hold_the_record_values():
    rec = random_record(LOWSTATE, np.random.default_rng(4))
    msg = CLASSES["LowState"]()
    record_to_message(rec, LOWSTATE, msg)
    assert msg.tick == int(rec["tick"]) and type(msg.tick) is int
    assert msg.motor_state[7].q == float(rec["motor_state"]["q"][7])
    np.testing.assert_array_equal(msg.motor_state[34].temperature,
                                  rec["motor_state"]["temperature"][34])
    np.testing.assert_array_equal(msg.imu_state.quaternion, rec["imu_state"]["quaternion"])
    np.testing.assert_array_equal(msg.wireless_remote, rec["wireless_remote"])
    rec["tick"] += 1                      # the message holds copies, not views
    assert msg.tick != int(rec["tick"])


def test_message_with_wrong_array_length_is_refused():
    msg = CLASSES["LowCmd"]()
    msg._motor_cmd = msg.motor_cmd[:29]
    with pytest.raises(ValueError, match="LowCmd_.motor_cmd: 29 items, expected 35"):
        message_to_record(msg, LOWCMD)


def test_ros2_transport_imports_without_rclpy():
    import bcg.transport.ros2 as ros2
    assert ros2.LOWCMD_ROS_TOPIC == "/lowcmd" and ros2.LOWSTATE_ROS_TOPIC == "/lowstate"
