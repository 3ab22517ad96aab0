"""The G1 wireless remote as LowState carries it (`wireless_remote`, 40 bytes).

Bytes 2-3: uint16 key bits, little-endian, bit 0..15 = R1, L1, start, select, R2, L2, F1, F2, A, B,
X, Y, up, right, down, left.
"""
import numpy as np

KEY_BITS = ("R1", "L1", "start", "select", "R2", "L2", "F1", "F2", "A", "B", "X", "Y",
            "up", "right", "down", "left")


def key_mask(*names: str) -> int:
    """The uint16 key bits of `names` (e.g. key_mask('start'))."""
    return sum(1 << KEY_BITS.index(n) for n in names)


def pressed_keys(wireless_remote) -> int:
    """The uint16 key bits of a LowState's `wireless_remote` (40 uint8)."""
    raw = np.asarray(wireless_remote, np.uint8)
    return int(raw[2]) | (int(raw[3]) << 8)


def set_keys(wireless_remote: np.ndarray, bits: int) -> None:
    """Write key bits into a `wireless_remote` array in place (test clients, simulators)."""
    wireless_remote[2] = bits & 0xFF
    wireless_remote[3] = (bits >> 8) & 0xFF
