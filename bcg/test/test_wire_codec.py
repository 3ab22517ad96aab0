"""The fast codec is byte-identical to cyclonedds' IdlStruct serialisation, both directions."""
import dataclasses

import numpy as np
import pytest

from bcg.wire import (
    LOWCMD,
    LOWSTATE,
    IMUState_,
    LowCmd_,
    LowState_,
    MotorCmd_,
    MotorState_,
    RecordEncoder,
    crc_ok,
    decode_lowcmd,
    decode_lowstate,
    encode_lowcmd,
    encode_lowstate,
)

RANGES = {"uint8": (0, 255), "int16": (-32768, 32767), "uint32": (0, 2 ** 32 - 1)}


def f32(rng, n=None):
    """Random float32-representable Python floats."""
    values = rng.normal(scale=5.0, size=n or 1).astype(np.float32).tolist()
    return values if n else values[0]


def u(rng, kind, n=None):
    lo, hi = RANGES[kind]
    values = [int(v) for v in rng.integers(lo, hi, size=n or 1, endpoint=True)]
    return values if n else values[0]


def random_lowcmd(rng) -> LowCmd_:
    motors = [MotorCmd_(u(rng, "uint8"), f32(rng), f32(rng), f32(rng), f32(rng), f32(rng),
                        u(rng, "uint32")) for _ in range(35)]
    return LowCmd_(u(rng, "uint8"), u(rng, "uint8"), motors, u(rng, "uint32", 4),
                   u(rng, "uint32"))


def random_lowstate(rng) -> LowState_:
    imu = IMUState_(f32(rng, 4), f32(rng, 3), f32(rng, 3), f32(rng, 3), u(rng, "int16"))
    motors = [MotorState_(u(rng, "uint8"), f32(rng), f32(rng), f32(rng), f32(rng),
                          u(rng, "int16", 2), f32(rng), u(rng, "uint32", 2), u(rng, "uint32"),
                          u(rng, "uint32", 4)) for _ in range(35)]
    return LowState_(u(rng, "uint32", 2), u(rng, "uint8"), u(rng, "uint8"), u(rng, "uint32"),
                     imu, motors, bytes(u(rng, "uint8", 40)), u(rng, "uint32", 4),
                     u(rng, "uint32"))


def assert_record_is(rec, msg):
    """Every member of the record equals the IdlStruct instance's (recursively)."""
    for field in dataclasses.fields(msg):
        value, got = getattr(msg, field.name), rec[field.name]
        if dataclasses.is_dataclass(value):
            assert_record_is(got, value)
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            for i, item in enumerate(value):
                assert_record_is(got[i], item)
        else:
            expected = np.frombuffer(value, np.uint8) if isinstance(value, bytes) else value
            np.testing.assert_array_equal(got, expected, err_msg=field.name)


CASES = [(LOWCMD, random_lowcmd, encode_lowcmd, decode_lowcmd),
         (LOWSTATE, random_lowstate, encode_lowstate, decode_lowstate)]


@pytest.mark.parametrize("codec, random_msg, encode, decode", CASES)
def test_idl_to_fast_and_back(codec, random_msg, encode, decode):
    rng = np.random.default_rng(7)
    for _ in range(20):
        msg = random_msg(rng)
        data = msg.serialize()
        assert len(data) == 4 + codec.plan.wire_size and data[:4] == b"\x00\x01\x00\x00"
        rec = decode(data)
        assert_record_is(rec, msg)
        msg.crc = codec.crc(rec)          # encode sets the CRC; make the IDL side agree
        assert encode(rec) == msg.serialize()
        assert crc_ok(rec)


@pytest.mark.parametrize("codec, random_msg, encode, decode", CASES)
def test_fast_to_idl(codec, random_msg, encode, decode):
    rng = np.random.default_rng(8)
    for _ in range(20):
        msg = random_msg(rng)
        rec = codec.from_idl(msg)
        assert_record_is(rec, msg)
        data = encode(rec)
        msg.crc = int(rec["crc"])
        assert type(msg).deserialize(data) == msg
        assert codec.to_idl(rec) == msg


@pytest.mark.parametrize("codec, random_msg, encode, decode", CASES)
def test_wire_dtype_is_the_cdr_payload(codec, random_msg, encode, decode):
    msg = random_msg(np.random.default_rng(9))
    wire = np.frombuffer(msg.serialize()[4:], codec.wire_dtype)[0]
    for name in codec.wire_dtype.names:
        value = msg
        for part in name.replace("]", "").replace("[", ".").split("."):
            value = value[int(part)] if part.isdigit() else getattr(value, part)
        expected = np.frombuffer(value, np.uint8) if isinstance(value, bytes) else value
        np.testing.assert_array_equal(wire[name], expected, err_msg=name)


def test_cdr_layout_differs_from_c_layout_where_documented():
    """CDR does not end-pad nested structs: LowState's first MotorState.mode follows the
    54-byte IMUState directly (payload offset 70), the next ones every 56 bytes from 124."""
    offsets = {name: LOWSTATE.wire_dtype.fields[name][1] for name in LOWSTATE.wire_dtype.names}
    assert offsets["imu_state.temperature"] == 68
    assert offsets["motor_state[0].mode"] == 70 and offsets["motor_state[0].q"] == 72
    assert offsets["motor_state[1].mode"] == 124 and offsets["crc"] == 2084
    cmd = {name: LOWCMD.wire_dtype.fields[name][1] for name in LOWCMD.wire_dtype.names}
    assert cmd["motor_cmd[0].mode"] == 2 and cmd["motor_cmd[1].mode"] == 28 and cmd["crc"] == 996


def test_decode_ignores_padding_garbage():
    msg = random_lowstate(np.random.default_rng(10))
    clean = bytearray(msg.serialize())
    dirty = bytearray(clean)
    dirty[4 + 71] = 0xAB                      # CDR padding after motor_state[0].mode
    dirty[4 + 125:4 + 128] = b"\x01\x02\x03"  # padding after motor_state[1].mode
    assert decode_lowstate(bytes(dirty)).tobytes() == decode_lowstate(bytes(clean)).tobytes()


def test_decode_rejects_bad_input():
    data = LowCmd_.serialize(random_lowcmd(np.random.default_rng(11)))
    with pytest.raises(ValueError, match="LowCmd_: 1000 bytes"):
        decode_lowcmd(data[:1000])
    with pytest.raises(ValueError, match="encapsulation"):
        decode_lowcmd(b"\x00\x00\x00\x00" + data[4:])    # big-endian CDR
    with pytest.raises(TypeError, match="LowCmd_ record"):
        encode_lowcmd(decode_lowstate(random_lowstate(np.random.default_rng(12)).serialize()))


def test_record_views():
    rec = LOWCMD.new()
    q = rec["motor_cmd"]["q"]
    assert q.shape == (35,) and q.dtype == np.float32
    q[:] = np.arange(35)
    rec["mode_machine"] = 5
    back = decode_lowcmd(encode_lowcmd(rec))
    np.testing.assert_array_equal(back["motor_cmd"]["q"], np.arange(35))
    assert back["mode_machine"] == 5 and back["crc"] == rec["crc"] != 0


@pytest.mark.parametrize("codec, random_msg, encode, decode", CASES)
def test_reused_encoder_matches_idl_for_every_message(codec, random_msg, encode, decode):
    """One RecordEncoder, many messages: nothing of a previous message or of the records' padding
    (random bytes here) leaks into the next serialization."""
    rng = np.random.default_rng(13)
    encoder = RecordEncoder(codec)
    for _ in range(10):
        raw = np.frombuffer(rng.integers(0, 256, codec.dtype.itemsize, dtype=np.uint8).tobytes(), codec.dtype)
        rec = raw.copy()[0]
        members = codec.from_idl(random_msg(rng))
        for name in codec.dtype.names:                    # members set field by field: padding stays random
            rec[name] = members[name]
        data = bytes(encoder.encode(rec))
        msg = codec.to_idl(rec)
        assert crc_ok(rec) and data == msg.serialize()
