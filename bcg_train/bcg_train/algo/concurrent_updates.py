"""Running an iteration's updates beside the actor's backward pass, in a second thread.

SHAC's critic and ADD discriminator updates (and PPO's discriminator update) read only the finished
window's detached data, and the actor's update reads none of what they write (the rewards read a
frozen copy of the discriminator; the target critic, which the actor's bootstraps read, is updated
after the backward pass): so the two can run at the same time, and the result is the one the
sequential order gives, bit for bit, whichever finishes first.
The trainer's random generator is drawn from by the updates alone while they run (the rollout
that draws action noise has finished), in the same order as before. On a CPU the simulator's
adjoint kernels and torch's operations release the interpreter lock, so the updates take the
second core while the main thread backpropagates through the simulator; on a GPU the host work of
both (launches, Python) overlaps.

With several ranks (`data_parallel`) the two threads must not share a process group (collectives
are matched by the order they are issued in): the updates use `Ranks.for_another_thread`. The
two-process gloo test fails when they share one; with NCCL on several GPUs this is untested here.
"""
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Tuple, TypeVar

Foreground = TypeVar("Foreground")
Background = TypeVar("Background")


class UpdateThread:
    """One worker thread, idle between iterations."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcg-updates")

    def run_beside(self, background: Callable[[], Background],
                   foreground: Callable[[], Foreground]) -> Tuple[Background, Foreground]:
        """Start `background` in the worker, run `foreground` here, and return both results once both
        have finished. The worker's exception is raised here; when `foreground` raises, the worker
        is waited for first, so nothing is left running."""
        pending = self._pool.submit(background)
        try:
            front = foreground()
        except BaseException:
            pending.exception()
            raise
        return pending.result(), front
