"""`RecordingTape`: a `wp.Tape` that the simulator can find while it records, through Warp's public API.

A simulator built with gradients records on the tape active around its `step` (`with Tape():`);
Warp keeps the active tape in its private runtime and has no public accessor, so the simulator's
tapes say themselves when they are entered and left (`recording()`). A plain `wp.Tape` records the
launches Warp makes but not the simulator's own adjoints (tape functions): `plain_tape_active()`
tells it apart, through the one public behaviour Warp has for it (a second tape refuses to enter),
so that the simulator refuses it instead of dropping gradients. One tape for both precisions: Warp
has one active tape.
"""
from typing import Optional

import warp as wp

_recording: Optional["RecordingTape"] = None


class RecordingTape(wp.Tape):
    """A `wp.Tape` that is `recording()` while entered (Warp allows one active tape at a time)."""

    def __enter__(self):
        global _recording
        super().__enter__()
        _recording = self
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        global _recording
        _recording = None
        super().__exit__(exc_type, exc_value, traceback)


def recording() -> Optional[RecordingTape]:
    """The `RecordingTape` entered now (`with tape:`), or None."""
    return _recording


def plain_tape_active() -> bool:
    """Whether a tape that is no `RecordingTape` (a plain `wp.Tape`) is active: Warp refuses to enter
    a second tape while one is (RuntimeError), else the probe enters and leaves at once."""
    if _recording is not None:
        return False
    try:
        with wp.Tape():
            return False
    except RuntimeError:
        return True
