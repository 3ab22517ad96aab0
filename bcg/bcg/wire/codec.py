"""Fast LowCmd / LowState codec: numpy records <-> serialized XCDR1 bytes, CRC included.

A message is a numpy structured record (``np.void``) in the robot's C layout
(``bcg.wire.layout.c_dtype``)::

    cmd = new_lowcmd()
    cmd['mode_machine'] = 5
    cmd['motor_cmd']['q'][:29] = q_target          # float32 (35,) view
    data = encode_lowcmd(cmd)                      # sets cmd['crc']; bytes for DDS
    state = decode_lowstate(data)                  # record; crc_ok(state) checks its CRC

The bytes are exactly what ``cyclonedds.idl.IdlStruct.serialize`` produces for the same message
(4-byte encapsulation header included), at a few microseconds instead of 120-215 us, because
the C layout maps onto the wire layout by a few slice copies (``CopyPlan``).
"""
from typing import Dict

import numpy as np

from bcg.wire.crc import crc32_words
from bcg.wire.idl import LowCmd_, LowState_
from bcg.wire.layout import CopyPlan, c_dtype, members, struct_fields, wire_dtype

CDR_LE = b"\x00\x01\x00\x00"
"""Encapsulation header of little-endian plain CDR (XCDR1), as Cyclone writes it."""
_ACCEPTED_HEADERS = (b"\x00\x01", b"\x00\x07")
"""CDR_LE and PLAIN_CDR2_LE: identical payloads for these messages (no primitive over 4 bytes,
only final structs)."""


class WireError(ValueError):
    """Bytes that are no sample of the message: too short, or not little-endian CDR; the message names
    the type, the size or the encapsulation."""


class MessageCodec:
    """Codec of one IDL struct whose last member is the uint32 ``crc``."""

    def __init__(self, idl_type: type):
        self.idl_type = idl_type
        self.dtype = c_dtype(idl_type)
        """C layout (nested numpy dtype): the record type."""
        self.wire_dtype = wire_dtype(idl_type)
        """XCDR1 payload layout (flat numpy dtype, one field per leaf)."""
        self.plan = CopyPlan.of(idl_type)
        names, fields = self.dtype.names or (), struct_fields(self.dtype)
        if names[-1:] != ("crc",) or fields["crc"][1] != self.dtype.itemsize - 4:
            raise ValueError(f"{idl_type.__name__}: the last member must be the uint32 'crc'")
        if min(run.wire_start for run in self.plan.runs) != 0:
            raise ValueError(f"{idl_type.__name__}: the payload must start with a member")
        self._wire_bytes = 4 + self.plan.wire_size

    def new(self) -> np.void:
        """An all-zero record. (Padding need not stay zero: CRC and encoding ignore it.)"""
        return np.zeros(1, self.dtype)[0]

    def crc(self, rec: np.void) -> int:
        """The robot's CRC32 of `rec` (every C-layout word but the last)."""
        return crc32_words(self._c_bytes(rec)[:-4])

    def crc_ok(self, rec: np.void) -> bool:
        """True when ``rec['crc']`` is the CRC of the rest of `rec`."""
        return int(rec["crc"]) == self.crc(rec)

    def encode(self, rec: np.void) -> bytes:
        """Serialized sample (encapsulation header + XCDR1 payload); sets ``rec['crc']``."""
        return bytes(RecordEncoder(self).encode(rec))

    def decode(self, data: bytes) -> np.void:
        """Record of a serialized sample (header included); padding bytes are zeroed. WireError when
        `data` is too short or not little-endian CDR (bytes past the message are ignored)."""
        if len(data) < self._wire_bytes:
            raise WireError(f"{self.idl_type.__name__}: {len(data)} bytes, expected "
                            f"{self._wire_bytes}")
        if bytes(data[:2]) not in _ACCEPTED_HEADERS:
            raise WireError(f"{self.idl_type.__name__}: unsupported encapsulation "
                            f"{bytes(data[:4]).hex()} (expected little-endian CDR)")
        view = memoryview(data)[4:]
        buf = bytearray(self.plan.c_size)
        for run in self.plan.runs:
            buf[run.c_start:run.c_start + run.nbytes] = view[run.wire_start:
                                                             run.wire_start + run.nbytes]
        u8 = np.frombuffer(buf, np.uint8)
        np.bitwise_and(u8, self.plan.field_mask, out=u8)
        return np.frombuffer(buf, self.dtype)[0]

    def _c_bytes(self, rec: np.void) -> bytes:
        """C-layout bytes of `rec` with padding forced to zero: numpy leaves padding
        uninitialised in copies of structured records, and stale padding breaks the CRC."""
        self._check_dtype(rec)
        return np.bitwise_and(np.frombuffer(rec, np.uint8), self.plan.field_mask).tobytes()

    def _check_dtype(self, rec: np.void) -> None:
        if rec.dtype != self.dtype:
            raise TypeError(f"expected a {self.idl_type.__name__} record, got dtype {rec.dtype}")

    def to_idl(self, rec: np.void):
        """The same message as an instance of the IdlStruct type (slow; for interop and tests)."""
        return _to_object(rec, self.idl_type)

    def from_idl(self, msg) -> np.void:
        """Record of an IdlStruct instance (slow; for interop and tests)."""
        rec = self.new()
        _fill_record(rec, msg)
        return rec


class RecordEncoder:
    """Serializes records of one codec into one reused buffer: no allocation per message.

    Not thread-safe: one encoder per thread (or under the caller's lock). The returned buffer is
    overwritten by the next `encode`; the transports copy it into the middleware at once.
    """

    def __init__(self, codec: MessageCodec):
        self.codec = codec
        self._c = np.zeros(codec.plan.c_size, np.uint8)
        """C-layout scratch (padding zeroed, CRC last)."""
        self._c_view = self._c.data
        self._crc = self._c[-4:].view("<u4")
        self._runs = [(run.c_start, run.c_start + run.nbytes, 4 + run.wire_start) for run in codec.plan.runs]
        self.out = bytearray(codec._wire_bytes)
        """Encapsulation header + XCDR1 payload; bytes between runs are wire padding and stay 0."""
        self.out[:4] = CDR_LE

    def encode(self, rec: np.void) -> bytearray:
        """`rec` serialized into `self.out` (returned); sets ``rec['crc']``."""
        self.codec._check_dtype(rec)
        np.bitwise_and(np.frombuffer(rec, np.uint8), self.codec.plan.field_mask, out=self._c)
        crc = crc32_words(self._c_view[:-4])
        rec["crc"] = crc
        self._crc[0] = crc
        out, c = self.out, self._c_view
        for c_start, c_end, wire_start in self._runs:
            out[wire_start:wire_start + c_end - c_start] = c[c_start:c_end]
        return out


def _to_object(rec, cls):
    """Build the IdlStruct `cls` from a record, recursively, by member name."""
    kwargs = {}
    for name, element, count in members(cls):
        value = rec[name]
        if isinstance(element, np.dtype) and count and element == np.uint8:
            kwargs[name] = value.tobytes()        # as IdlStruct.deserialize returns uint8[N]
        elif isinstance(element, np.dtype):
            kwargs[name] = value.tolist() if count else value.item()
        elif count:
            kwargs[name] = [_to_object(item, element) for item in value]
        else:
            kwargs[name] = _to_object(value, element)
    return cls(**kwargs)


def _fill_record(rec, msg) -> None:
    """Copy the members of `msg` (attributes named like the record's fields) into `rec`."""
    for name in rec.dtype.names:
        value = getattr(msg, name)
        sub = rec.dtype.fields[name][0]
        if sub.names is None and sub.base.names is None:   # primitive or array of them
            rec[name] = np.frombuffer(value, np.uint8) if isinstance(value, bytes) else value
        elif sub.shape:                                    # array of structs
            items = rec[name]
            for i, item in enumerate(value):
                _fill_record(items[i], item)
        else:
            _fill_record(rec[name], value)


LOWCMD = MessageCodec(LowCmd_)
"""Codec of LowCmd_ (C layout 1004 bytes, serialized 1004 bytes)."""
LOWSTATE = MessageCodec(LowState_)
"""Codec of LowState_ (C layout 2092 bytes, serialized 2092 bytes)."""
_BY_DTYPE: Dict[np.dtype, MessageCodec] = {LOWCMD.dtype: LOWCMD, LOWSTATE.dtype: LOWSTATE}


def new_lowcmd() -> np.void:
    """All-zero LowCmd record."""
    return LOWCMD.new()


def new_lowstate() -> np.void:
    """All-zero LowState record."""
    return LOWSTATE.new()


def encode_lowcmd(rec: np.void) -> bytes:
    """Serialized LowCmd (sets ``rec['crc']``)."""
    return LOWCMD.encode(rec)


def decode_lowcmd(data: bytes) -> np.void:
    """LowCmd record of serialized bytes."""
    return LOWCMD.decode(data)


def encode_lowstate(rec: np.void) -> bytes:
    """Serialized LowState (sets ``rec['crc']``)."""
    return LOWSTATE.encode(rec)


def decode_lowstate(data: bytes) -> np.void:
    """LowState record of serialized bytes."""
    return LOWSTATE.decode(data)


def lowcmd_crc(rec: np.void) -> int:
    """The robot's CRC of a LowCmd record."""
    return LOWCMD.crc(rec)


def lowstate_crc(rec: np.void) -> int:
    """The robot's CRC of a LowState record."""
    return LOWSTATE.crc(rec)


def codec_of(rec: np.void) -> MessageCodec:
    """The codec of a LowCmd or LowState record (by its dtype)."""
    try:
        return _BY_DTYPE[rec.dtype]
    except KeyError:
        raise TypeError(f"not a LowCmd / LowState record: dtype {rec.dtype}") from None


def crc_ok(rec: np.void) -> bool:
    """True when the record's ``crc`` matches its contents (LowCmd or LowState)."""
    return codec_of(rec).crc_ok(rec)
