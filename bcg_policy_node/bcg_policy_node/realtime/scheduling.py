"""Best-effort real-time scheduling and deadline waits for the node's time-critical threads.

Nothing here is required for correctness; it narrows timing jitter where the OS allows it:
- `request_fifo(priority)`: SCHED_FIFO for the calling thread (Linux applies it per thread). Needs
  root or an `rtprio` limit (e.g. `@realtime - rtprio 90` in /etc/security/limits.conf); refused,
  the thread keeps normal scheduling and the caller logs the returned note.
- `request_cpu(cpu)`: pin the calling thread to one CPU (`os.sched_setaffinity`), so that the
  receiver and the writer neither migrate nor preempt each other.
- `wait_until(deadline, spin_s, ...)`: block until `spin_s` before a deadline, then spin on the
  clock for the rest: a timed wait wakes up tens to hundreds of microseconds late on a loaded
  machine, the spin makes the last stretch exact at the cost of `spin_s` of CPU per deadline.
- `advance(deadline, period, now)`: the next deadline of a fixed-rate schedule.
- `PolicySchedule`: which LowState runs each policy step.
"""
import os
from typing import Callable, Optional

Clock = Callable[[], float]


def request_fifo(priority: int) -> str:
    """Try SCHED_FIFO at `priority` (1..99; 0: leave the scheduling alone) for the calling thread.

    Returns a note for the log saying what is in effect.
    """
    if priority <= 0:
        return "normal scheduling"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, OSError) as e:   # not Linux, or not permitted (no rtprio limit, not root)
        return f"normal scheduling (SCHED_FIFO {priority} refused: {e})"
    return f"SCHED_FIFO priority {priority}"


def request_cpu(cpu: int) -> str:
    """Try to pin the calling thread to CPU `cpu` (-1: leave it alone); returns a note for the log."""
    if cpu < 0:
        return "any CPU"
    try:
        os.sched_setaffinity(0, {cpu})
    except (AttributeError, OSError) as e:   # not Linux, or no such CPU
        return f"any CPU (CPU {cpu} refused: {e})"
    return f"CPU {cpu}"


def wait_until(deadline: float, spin_s: float, clock: Clock, block: Callable[[float], bool],
               poll: Callable[[], bool]) -> bool:
    """Wait until `clock()` reaches `deadline` (s); True when woken early instead.

    Until `spin_s` before the deadline it waits in `block(timeout_s)` (True: woken); then it spins,
    calling `poll()` (True: woken) between clock reads.
    """
    remaining = deadline - spin_s - clock()
    if remaining > 0 and block(remaining):
        return True
    while clock() < deadline:
        if poll():
            return True
    return False


def advance(deadline: float, period: float, now: float) -> float:
    """The next deadline: `deadline + period` (fixed phase, never sleep-after-work), or `now` when
    that is more than a period in the past (resynchronise instead of bursting to catch up)."""
    following = deadline + period
    return following if following >= now - period else now


class PolicySchedule:
    """Which LowState runs the policy: the one nearest each deadline of a fixed-rate schedule.

    Deadlines are `period_s` apart (fixed phase), starting at the first step. LowState
    comes on the robot's own schedule (500 Hz), so its arrivals sit on the deadlines, jittering
    around them by tens of microseconds (the first deadline was an arrival). A LowState up to half
    a LowState interval before a deadline is therefore on time: without that slack, every early
    arrival would push its step one whole LowState interval (2 ms, a tenth of the policy period)
    late. The interval is learnt from the arrivals (exponential average; gaps of a policy period
    or more, i.e. dropouts, are left out).
    """

    SMOOTHING = 0.05
    """Weight of each new inter-arrival time in the average."""

    def __init__(self, period_s: float):
        self.period_s = period_s
        self.deadline: Optional[float] = None
        """s, monotonic: the next step's deadline (None: the next LowState steps)."""
        self.state_interval_s = 0.0
        """s: average LowState inter-arrival time (0 until two have arrived)."""
        self._last_arrival: Optional[float] = None

    def arrival(self, now: float) -> bool:
        """A LowState arrived at `now`; True when it should run the policy step."""
        if self._last_arrival is not None:
            gap = now - self._last_arrival
            if 0 < gap < self.period_s:
                self.state_interval_s = (gap if self.state_interval_s == 0
                                         else self.state_interval_s + self.SMOOTHING * (gap - self.state_interval_s))
        self._last_arrival = now
        return self.deadline is None or now >= self.deadline - 0.5 * self.state_interval_s

    def stepped(self, now: float) -> None:
        """The step due at `now` ran: the next deadline is a period later, in phase with the previous
        ones; after the first step or a whole period late (LowState stopped), a period from `now`."""
        if self.deadline is None or now - self.deadline >= self.period_s:
            self.deadline = now + self.period_s
        else:
            self.deadline += self.period_s
