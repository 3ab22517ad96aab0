"""The `Reader` both transports share: CRC filtering, counters, blocking wait, the newest samples."""
import collections
import threading
import time
from typing import Deque, List, Optional

import numpy as np

from bcg.transport import DROP_REASONS, Reader
from bcg.wire import MessageCodec


class LatestSampleReader(Reader):
    """Keeps the newest `depth` valid records offered by the middleware.

    Subclasses deliver records through `offer` (from a callback thread) and/or `_poll` (pulled
    on `take`), and implement `_block` to sleep until the middleware has something new.
    """

    def __init__(self, codec: MessageCodec, check_crc: bool, depth: int = 1):
        if depth < 1:
            raise ValueError(f"depth: {depth} must be >= 1")
        self.codec = codec
        self.check_crc = check_crc
        self.depth = depth
        self.received = 0
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self._kept: Deque[np.void] = collections.deque(maxlen=depth)
        self._cond = threading.Condition()

    def drop(self, reason: str) -> None:
        """Count one sample dropped for `reason` (one of `DROP_REASONS`)."""
        with self._cond:
            self.dropped[reason] += 1

    def offer(self, rec: np.void) -> bool:
        """Keep `rec` as the newest sample unless its CRC is wrong; True when kept."""
        if self.check_crc and not self.codec.crc_ok(rec):
            self.drop("crc")
            return False
        with self._cond:
            self._kept.append(rec)
            self.received += 1
            self._cond.notify_all()
        return True

    def take(self) -> Optional[np.void]:
        self._poll()
        with self._cond:
            rec = self._kept[-1] if self._kept else None
            self._kept.clear()
        return rec

    def take_all(self) -> List[np.void]:
        self._poll()
        with self._cond:
            recs = list(self._kept)
            self._kept.clear()
        return recs

    def wait(self, timeout_s: float) -> Optional[np.void]:
        recs = self.wait_all(timeout_s)
        return recs[-1] if recs else None

    def wait_all(self, timeout_s: float) -> List[np.void]:
        deadline = time.monotonic() + timeout_s
        while True:
            recs = self.take_all()
            remaining = deadline - time.monotonic()
            if recs or remaining <= 0:
                return recs
            self._block(remaining)

    def _poll(self) -> None:
        """Pull what the middleware holds into `offer` (nothing for callback-driven readers)."""

    def _block(self, timeout_s: float) -> None:
        """Sleep until a new sample may be available, at most `timeout_s` seconds."""
        with self._cond:
            if not self._kept:
                self._cond.wait(timeout_s)
