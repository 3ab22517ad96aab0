"""Atomic file replacement: readers see either the old file or the complete new one."""
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Union


def atomic_write(path: Union[str, Path], write: Callable[[BinaryIO], None]) -> Path:
    """Call `write` on a temporary file beside `path`, fsync it, then os.replace it onto `path`.

    If anything fails or is interrupted (Ctrl-C) on the way, the temporary file is removed and `path`
    is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
