"""Records <-> ROS 2 ``unitree_hg`` message objects, without importing rclpy.

unitree_ros2's ``unitree_hg/msg/LowCmd`` etc. have the same members, in the same order, as the
IDL types of ``bcg.wire.idl`` (ROS 2 maps them onto those very DDS types), so the conversion is
driven by the IDL member list. It follows the conventions of rosidl-generated Python classes:
scalars are Python ``int`` / ``float``, fixed arrays of numbers are numpy arrays of the exact dtype,
arrays of messages are lists of message objects, and each field ``f`` is a property over the slot
``_f`` whose setter checks the value's type and range.

Outgoing (`MessageFiller`, 500 Hz in the bridge and the node's writer): one preallocated message
whose numeric arrays are, once and for all, views into the filler's own record (rosidl reads them
at publish time), so a fill is one record copy plus, per scalar member, one ``tolist`` across all
35 motors and a direct slot store. The checks the setters would make hold by construction: every
value comes out of a C-layout record of the member's own type (in range; float32 as a Python float).
Incoming (`message_to_record`): per scalar member, one attribute read per motor into one numpy
column assignment.
"""
import functools
import operator
import types
from typing import Callable, List, Sequence, Tuple

import numpy as np

from bcg.wire import MessageCodec
from bcg.wire.layout import members


@functools.lru_cache(maxsize=None)
def _members(struct: type):
    return tuple(members(struct))


def _slot(cls: type, name: str):
    """The slot descriptor behind property `name` of a rosidl-style class (None if it has none)."""
    slot = getattr(cls, "_" + name, None)
    return slot if isinstance(slot, types.MemberDescriptorType) else None


def _class_of(objs: Sequence) -> type:
    """The class of the (same-class) objects `objs`."""
    return type(objs[0])


@functools.lru_cache(maxsize=None)
def _setter(cls: type, name: str) -> Callable:
    """f(obj, value) storing a checked-by-construction scalar: the slot, else the public setter."""
    slot = _slot(cls, name)
    return slot.__set__ if slot is not None else (lambda obj, value: setattr(obj, name, value))


@functools.lru_cache(maxsize=None)
def _getter(cls: type, name: str) -> Callable:
    """f(obj) reading member `name`: the slot, else the public getter."""
    return operator.attrgetter("_" + name if _slot(cls, name) is not None else name)


class MessageFiller:
    """One preallocated ROS message, filled from records: `fill(rec)` returns the same `msg` each time.

    `msg` is a default-constructed message of `codec`'s type (nested messages and lists in place).
    Its numeric array members are replaced, through their public setters (checked once), by views
    into this filler's record; scalars are stored at each fill.
    """

    def __init__(self, msg, codec: MessageCodec):
        self.msg, self.codec = msg, codec
        self._record = np.zeros(1, codec.dtype)
        self._scalars: List[Tuple[Callable, Sequence, np.ndarray]] = []
        """(store, objects, column view into the record) of each scalar member, across its objects."""
        self._bind([msg], self._record, codec.idl_type)

    def _bind(self, objs: Sequence, column: np.ndarray, struct: type) -> None:
        for name, element, count in _members(struct):
            values = column[name]
            if isinstance(element, np.dtype) and count:
                for obj, view in zip(objs, values):
                    setattr(obj, name, view)
            elif isinstance(element, np.dtype):
                self._scalars.append((_setter(_class_of(objs), name), objs, values))
            elif count:
                for obj, sub in zip(objs, values):
                    nested = getattr(obj, name)
                    if len(nested) != count:
                        raise ValueError(f"{struct.__name__}.{name}: {len(nested)} items, expected {count}")
                    self._bind(nested, sub, element)
            else:
                self._bind([getattr(obj, name) for obj in objs], values, element)

    def fill(self, rec: np.void):
        """The message holding every member of `rec` (the CRC as it is); valid until the next fill."""
        self._record[0] = rec
        for store, objs, values in self._scalars:
            for obj, value in zip(objs, values.tolist()):
                store(obj, value)
        return self.msg


def message_to_record(msg, codec: MessageCodec) -> np.void:
    """A new record holding every member of the ROS message `msg` (padding zero).

    Raises ValueError for an array of messages of the wrong length."""
    column = np.zeros(1, codec.dtype)
    _from_messages([msg], column, codec.idl_type)
    return column[0]


def _from_messages(objs: Sequence, column: np.ndarray, struct: type) -> None:
    """Fill the records `column` member by member from the objects `objs` (same length)."""
    cls = _class_of(objs)
    for name, element, count in _members(struct):
        values = list(map(_getter(cls, name), objs))
        if isinstance(element, np.dtype):
            if count and element == np.uint8:
                values = [np.frombuffer(v, np.uint8) if isinstance(v, (bytes, bytearray)) else v for v in values]
            column[name] = values
        elif count:
            for value, sub in zip(values, column[name]):
                if len(value) != count:
                    raise ValueError(f"{struct.__name__}.{name}: {len(value)} items, expected {count}")
                _from_messages(value, sub, element)
        else:
            _from_messages(values, column[name], element)
