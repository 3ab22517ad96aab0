"""Stand-ins for unitree_ros2's ``unitree_hg/msg`` Python classes, where ROS 2 is absent.

Built from unitree_ros2's ``unitree_hg/msg/*.msg`` field lists and shaped like rosidl-generated
Python classes: every field is a property over a slot named ``_<field>``, whose setter checks what
rosidl's checks (Python int in range / float scalars, numpy arrays of the exact dtype and length,
lists of messages of the right class and length); a default-constructed message holds zeros, zero
arrays and default nested messages. For the conversion's tests and `bench/bench_ros2_convert.py`.
"""
from typing import Any, Dict, List, Tuple

import numpy as np

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
"""unitree_hg's message definitions (type, name per line), in declaration order."""
NUMPY: Dict[str, Any] = {"uint8": np.uint8, "int16": np.int16, "uint32": np.uint32, "float32": np.float32}
FLOAT32_MAX = float(np.finfo(np.float32).max)
CLASSES: Dict[str, type] = {}
"""Message name (e.g. 'LowState') -> stand-in class."""


def _parse(text: str) -> List[Tuple[str, str, int]]:
    """(field, type, count; 0 for a scalar) of each line of a .msg text."""
    fields = []
    for line in text.splitlines():
        kind, member = line.split()
        count = int(kind[kind.index("[") + 1:-1]) if "[" in kind else 0
        fields.append((member, kind.split("[")[0], count))
    return fields


def _check(name: str, kind: str, value) -> None:
    if kind in CLASSES:
        assert isinstance(value, CLASSES[kind]), f"{name}: not a {kind}"
    elif kind == "float32":
        assert isinstance(value, float), f"{name}: {type(value)} is not float"
        assert not (value < -FLOAT32_MAX or value > FLOAT32_MAX) or np.isinf(value), f"{name}: out of float32"
    else:
        info = np.iinfo(NUMPY[kind])
        assert isinstance(value, int) and info.min <= value <= info.max, f"{name}: {value!r} is not a {kind}"


def _property(name: str, kind: str, count: int) -> property:
    slot = "_" + name

    def setter(self, value):
        if not count:
            _check(name, kind, value)
        elif kind in CLASSES:
            assert isinstance(value, list) and len(value) == count, name
            for item in value:
                _check(name, kind, item)
        elif isinstance(value, np.ndarray):
            assert value.dtype == NUMPY[kind] and value.size == count, f"{name}: {value.dtype}"
        else:
            value = np.array(value, dtype=NUMPY[kind])
            assert value.shape == (count,), name
        setattr(self, slot, value)

    return property(lambda self: getattr(self, slot), setter)


def _default(kind: str, count: int):
    if kind in CLASSES:
        return [CLASSES[kind]() for _ in range(count)] if count else CLASSES[kind]()
    if count:
        return np.zeros(count, NUMPY[kind])
    return 0.0 if kind == "float32" else 0


def _build(name: str, text: str) -> type:
    fields = _parse(text)
    namespace = {"__slots__": ["_" + member for member, _, _ in fields], "_fields": fields}
    for member, kind, count in fields:
        namespace[member] = _property(member, kind, count)

    def __init__(self):
        for member, kind, count in fields:
            setattr(self, member, _default(kind, count))

    namespace["__init__"] = __init__
    return type(name, (), namespace)


for _name, _text in MSG_FILES.items():
    CLASSES[_name] = _build(_name, _text)
