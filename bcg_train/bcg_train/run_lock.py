"""One training process per run folder: `RunFolderLock` holds `<run>/.lock` while a run writes there.

Two trainings writing one folder (the same `--run-dir` twice, or a `--resume` of a run still
training) interleave their rows in metrics.csv and their checkpoints, and the file that results
reads as neither run. The lock file names the process that holds it (host and pid); a lock whose
process is gone on this host (a run killed without cleaning up) is taken over.
"""
import os
import socket
from pathlib import Path
from types import TracebackType
from typing import Optional, Type

LOCK_NAME = ".lock"


class RunFolderInUse(RuntimeError):
    """Another live process holds the run folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:          # exists, owned by someone else
        return True
    return True


class RunFolderLock:
    """`with RunFolderLock(run_dir):` creates the folder if needed and holds `<run_dir>/.lock` (this
    host and pid) until the block ends; RunFolderInUse names the holder when a live process of this
    host, or any process of another host, holds it."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_NAME
        self._held = False

    def __enter__(self) -> "RunFolderLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        host, pid = socket.gethostname(), os.getpid()
        claim = self.path.with_name(f"{LOCK_NAME}.{host}.{pid}")
        claim.write_text(f"{host} {pid}\n")
        try:
            for _ in range(2):
                try:
                    os.link(claim, self.path)       # the lock appears with its content, or not at all
                except FileExistsError:
                    self._take_over_if_stale()
                    continue
                self._held = True
                return self
        finally:
            claim.unlink(missing_ok=True)
        raise RunFolderInUse(f"run folder {self.path.parent}: another process took it at the same moment")

    def _take_over_if_stale(self) -> None:
        try:
            host, pid = self.path.read_text().split()
            pid_number = int(pid)
        except (OSError, ValueError):
            host, pid_number = "", -1        # unreadable: not a lock this class wrote (it writes it whole)
        if host and host != socket.gethostname():
            raise RunFolderInUse(f"run folder {self.path.parent} is in use by process {pid_number} on {host} "
                                 f"(remove {self.path} if that run is over)")
        if pid_number > 0 and _alive(pid_number):
            raise RunFolderInUse(f"run folder {self.path.parent} is in use by process {pid_number} (a training "
                                 f"still running there): wait for it, stop it, or give another --run-dir")
        self.path.unlink(missing_ok=True)

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        if self._held:
            self.path.unlink(missing_ok=True)
            self._held = False
