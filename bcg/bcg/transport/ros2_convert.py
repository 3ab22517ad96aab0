"""Records <-> ROS 2 ``unitree_hg`` message objects, without importing rclpy.

unitree_ros2's ``unitree_hg/msg/LowCmd`` etc. have the same members, in the same order, as the
IDL types of ``bcg.wire.idl`` (ROS 2 maps them onto those very DDS types), so the conversion is
driven by the IDL member list. It follows the conventions of rosidl-generated Python classes:
scalars are Python ``int`` / ``float`` (their setters reject numpy scalars), fixed arrays of
numbers are numpy arrays of the exact dtype, arrays of messages are lists of message objects
that already exist in a default-constructed message (so nothing here needs the nested classes).
Work is done per column (one numpy call per member across all 35 motors), not per element.
"""
import functools
from typing import List, Sequence

import numpy as np

from bcg.wire import MessageCodec
from bcg.wire.layout import members


@functools.lru_cache(maxsize=None)
def _members(struct: type):
    return tuple(members(struct))


def record_to_message(rec: np.void, codec: MessageCodec, msg) -> None:
    """Copy every member of `rec` into the ROS message `msg` (in place; the CRC as it is)."""
    _to_messages([msg], np.asarray(rec).reshape(1), codec.idl_type)


def message_to_record(msg, codec: MessageCodec) -> np.void:
    """A new record holding every member of the ROS message `msg` (padding zero)."""
    column = np.zeros(1, codec.dtype)
    _from_messages([msg], column, codec.idl_type)
    return column[0]


def _to_messages(objs: Sequence, column: np.ndarray, struct: type) -> None:
    """Set member by member the objects `objs` from the records `column` (same length)."""
    for name, element, count in _members(struct):
        values = column[name]
        if isinstance(element, np.dtype):
            items = list(values.copy()) if count else values.tolist()
            for obj, value in zip(objs, items):
                setattr(obj, name, value)
        elif count:
            for obj, sub in zip(objs, values):
                _to_messages(getattr(obj, name), sub, element)
        else:
            _to_messages([getattr(obj, name) for obj in objs], values, element)


def _from_messages(objs: Sequence, column: np.ndarray, struct: type) -> None:
    """Fill the records `column` member by member from the objects `objs` (same length)."""
    for name, element, count in _members(struct):
        values: List = [getattr(obj, name) for obj in objs]
        if isinstance(element, np.dtype):
            column[name] = [np.frombuffer(v, np.uint8) if isinstance(v, (bytes, bytearray))
                            else v for v in values]
        elif count:
            for value, sub in zip(values, column[name]):
                if len(value) != count:
                    raise ValueError(f"{struct.__name__}.{name}: {len(value)} items, "
                                     f"expected {count}")
                _from_messages(value, sub, element)
        else:
            _from_messages(values, column[name], element)
