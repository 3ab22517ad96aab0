"""The fast CRC against the robot's definition, a plain bit loop written here."""
import numpy as np
import pytest

from bcg.wire import LOWCMD, LOWSTATE, crc_ok, lowcmd_crc, lowstate_crc
from bcg.wire.crc import crc32_words

POLY = 0x04C11DB7


def robot_crc(data: bytes) -> int:
    """G1.md "CRC", literally: per little-endian uint32 word, bits 31 down to 0."""
    crc = 0xFFFFFFFF
    for (word,) in np.frombuffer(data, "<u4").reshape(-1, 1).tolist():
        for bit in range(31, -1, -1):
            top = crc & 0x80000000
            crc = (crc << 1) & 0xFFFFFFFF
            if top:
                crc ^= POLY
            if (word >> bit) & 1:
                crc ^= POLY
    return crc


def mpeg2_crc(data: bytes) -> int:
    """CRC-32/MPEG-2 by its catalogue definition (MSB first, init all ones, no final XOR)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ POLY if crc & 0x80000000 else crc << 1) & 0xFFFFFFFF
    return crc


def random_record(codec, rng):
    """A record with every member random (integers over their full range, floats normal)."""
    rec = codec.new()

    def fill(view):
        for name in view.dtype.names:
            sub = view[name]
            if isinstance(sub, np.void) or (isinstance(sub, np.ndarray) and sub.dtype.names):
                fill(sub)
                continue
            dtype = view.dtype.fields[name][0].base
            shape = view.dtype.fields[name][0].shape
            if dtype.kind == "f":
                value = rng.normal(scale=10.0, size=shape).astype(dtype)
            else:
                info = np.iinfo(dtype)
                value = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
            view[name] = value

    fill(rec)
    return rec


@pytest.mark.parametrize("n_words", [1, 2, 7, 250, 522])
def test_fast_crc_is_the_robot_bit_loop(n_words):
    rng = np.random.default_rng(n_words)
    for data in (bytes(4 * n_words), b"\xff" * 4 * n_words, rng.bytes(4 * n_words)):
        assert crc32_words(data) == robot_crc(data)


def test_robot_loop_is_mpeg2_over_big_endian_words():
    data = np.random.default_rng(0).bytes(64)
    big_endian = np.frombuffer(data, ">u4").astype("<u4").tobytes()
    assert robot_crc(data) == mpeg2_crc(big_endian)
    assert mpeg2_crc(b"123456789") == 0x0376E6E7  # the catalogue's check value


@pytest.mark.parametrize("codec, crc_of, size", [(LOWCMD, lowcmd_crc, 1004),
                                                 (LOWSTATE, lowstate_crc, 2092)])
def test_message_crc_over_c_layout(codec, crc_of, size):
    rng = np.random.default_rng(size)
    zero = codec.new()
    assert zero.tobytes() == bytes(size)
    assert crc_of(zero) == robot_crc(bytes(size - 4))
    for _ in range(3):
        rec = random_record(codec, rng)
        assert crc_of(rec) == robot_crc(rec.tobytes()[:-4])
        rec["crc"] = crc_of(rec)
        assert crc_ok(rec)
        rec["crc"] ^= 1
        assert not crc_ok(rec)


def c_padding(codec):
    """Padding byte offsets of the robot's C structs, by hand from G1.md "Messages"."""
    if codec is LOWCMD:  # mode_pr, mode_machine, pad 2; MotorCmd (28 B): mode, pad 3
        return [2, 3] + [4 + 28 * k + j for k in range(35) for j in (1, 2, 3)]
    # version[2], mode_pr, mode_machine, pad 2, tick, IMUState (54 B + pad 2), MotorState (56 B)
    return [10, 11, 70, 71] + [72 + 56 * k + j for k in range(35) for j in (1, 2, 3)]


@pytest.mark.parametrize("codec", [LOWCMD, LOWSTATE])
def test_all_ones_with_stale_padding(codec):
    """All bytes 0xFF, padding included: the CRC is that of the struct with zero padding."""
    size = codec.dtype.itemsize
    rec = np.frombuffer(bytearray(b"\xff" * size), codec.dtype)[0]
    ones = np.full(size, 0xFF, np.uint8)
    ones[c_padding(codec)] = 0
    assert codec.crc(rec) == robot_crc(ones.tobytes()[:-4])
    assert sorted(np.flatnonzero(codec.plan.field_mask == 0)) == c_padding(codec)


def test_copied_record_keeps_its_crc():
    """numpy copies of a record may carry garbage padding; the CRC must not see it."""
    rec = random_record(LOWSTATE, np.random.default_rng(2))
    expected = robot_crc(rec.tobytes()[:-4])
    for _ in range(5):
        assert lowstate_crc(rec.copy()) == expected


def test_crc_excludes_only_the_crc_word():
    rec = random_record(LOWCMD, np.random.default_rng(1))
    before = lowcmd_crc(rec)
    rec["crc"] = 12345
    assert lowcmd_crc(rec) == before
    rec["reserve"][3] ^= 1  # the word just before the crc
    assert lowcmd_crc(rec) != before


def test_padding_layout_is_the_robot_struct():
    """1004 / 2092 bytes, members where the 4-byte-aligned C structs put them."""
    cmd, state = LOWCMD.dtype, LOWSTATE.dtype
    assert (cmd.itemsize, state.itemsize) == (1004, 2092)
    assert cmd.fields["motor_cmd"][1] == 4 and cmd["motor_cmd"].base.itemsize == 28
    assert cmd.fields["crc"][1] == 1000
    assert state.fields["tick"][1] == 12 and state.fields["imu_state"][1] == 16
    assert state.fields["motor_state"][1] == 72 and state["motor_state"].base.itemsize == 56
    assert state.fields["wireless_remote"][1] == 2032 and state.fields["crc"][1] == 2088
