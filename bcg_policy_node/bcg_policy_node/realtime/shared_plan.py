"""The command plan in shared memory, between the policy process and the LowCmd writer process.

One `PLAN_DTYPE` record in a `multiprocessing` shared buffer, copied whole under a process-shared
lock (a few microseconds; the lock's semaphore operations are also the memory barriers that make
the copy visible on weakly ordered CPUs such as the robot's ARM computer), and a semaphore by which
the policy process wakes the writer when new targets should go out at once.

Create it in the parent with `SharedPlan.create(ctx)`, pass `handles()` to the child process and
rebuild it there with `SharedPlan(*handles)`.
"""
import numpy as np

from ..core.command_plan import PLAN_DTYPE

LOCK_TIMEOUT_S = 0.05
"""Longest wait for the plan lock; the holder only copies ~1.5 KB, so a timeout means it died holding it."""


class SharedPlan:
    def __init__(self, buffer, lock, wake):
        self._buffer, self._lock, self._wake = buffer, lock, wake
        self._shared = np.frombuffer(buffer, np.uint8)
        if self._shared.size != PLAN_DTYPE.itemsize:
            raise ValueError(f"shared plan buffer: {self._shared.size} bytes, expected {PLAN_DTYPE.itemsize}")

    @classmethod
    def create(cls, ctx) -> "SharedPlan":
        """A zeroed shared plan from a multiprocessing context (use 'spawn')."""
        return cls(ctx.RawArray("B", PLAN_DTYPE.itemsize), ctx.Lock(), ctx.Semaphore(0))

    def handles(self) -> tuple:
        """What a child process needs (passed as `Process` arguments): SharedPlan(*handles)."""
        return self._buffer, self._lock, self._wake

    def publish(self, plan: np.void) -> bool:
        """Copy `plan` into shared memory; False when the lock was not free in time (the writer was
        preempted, or died, holding it): the caller's next publish carries the same, newer plan."""
        src = np.frombuffer(plan, np.uint8)
        if not self._lock.acquire(timeout=LOCK_TIMEOUT_S):
            return False
        try:
            self._shared[:] = src
        finally:
            self._lock.release()
        return True

    def read(self, into: np.ndarray, timeout_s: float = LOCK_TIMEOUT_S) -> bool:
        """Copy the shared plan into `into` (a (1,) PLAN_DTYPE array); False when the lock timed out."""
        if not self._lock.acquire(timeout=timeout_s):
            return False
        try:
            into.view(np.uint8)[:] = self._shared
        finally:
            self._lock.release()
        return True

    def wake_writer(self) -> None:
        """Ask the writer to write at once (new targets)."""
        self._wake.release()

    def wait_for_wake(self, timeout_s: float) -> bool:
        """Block up to `timeout_s` for a wake-up; True when woken (pending wake-ups are merged)."""
        if not self._wake.acquire(timeout=timeout_s):
            return False
        self.drain_wakes()
        return True

    def poll_wake(self) -> bool:
        """True when a wake-up is pending (consumed, with any others)."""
        if not self._wake.acquire(False):
            return False
        self.drain_wakes()
        return True

    def drain_wakes(self) -> None:
        while self._wake.acquire(False):
            pass
