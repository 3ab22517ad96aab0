"""Atomic file replacement for everything the suite writes: readers see either the old file or the
complete new one, and an error or Ctrl-C on the way leaves `path` as it was."""
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Union


def write_atomic(path: Union[str, Path], write: Callable[[BinaryIO], object]) -> Path:
    """Call `write(binary_file)` on a temporary file beside `path`, fsync it, make it readable like a
    normally created file (mode 0644) and rename it onto `path`; the temporary file is removed on error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_text_atomic(path: Union[str, Path], text: str) -> Path:
    """`write_atomic` of `text` encoded as UTF-8."""
    return write_atomic(path, lambda f: f.write(text.encode("utf-8")))
