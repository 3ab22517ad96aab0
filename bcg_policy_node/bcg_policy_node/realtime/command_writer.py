"""The LowCmd writer, in a process of its own: its 500 Hz deadlines never wait for the policy
process's GIL (a policy step holds it for hundreds of microseconds).

Each write reads the command plan from shared memory (`SharedPlan`), evaluates it at the write
time (`LowCmdComposer`) and publishes a LowCmd through its own transport (its own DDS participant,
or its own ROS 2 node). Writes happen on a deadline schedule at `writer_hz` (next deadline =
previous + period), and at once when the policy process wakes it with new targets. In lockstep
(the plan says so) it writes only when woken, once per LowState, the plan composed at that
LowState's simulated time, its tick echoed in reserve[0]: the simulator steps on that answer.

The writer enforces on its own, latching damping and reporting the reason to the policy process:
- LowState staleness: `state_time` (written by the policy process at each LowState) older than
  `stale_after_s`, whatever the policy process is doing (not in lockstep: simulated time stands
  still while no LowState comes);
- a non-finite value about to go on the wire (it is never sent);
- the policy process gone (parent pid changed): damping for `shutdown_damping_s`, then exit;
- a write the middleware refuses (it raises): damping from then on, writes go on.
When the plan lock is not free within half a write period (the policy process was preempted, or
died, holding it), the writer goes on with its last copy of the plan, whose `state_time` then
ages until the staleness check damps: it never waits on the policy process.
It ends at the plan's `stop_at` (the policy process's stop: damping was published until then).
SIGINT / SIGTERM are blocked in this process (the parent blocks them around the spawn): Ctrl-C
reaches the whole process group, and only the policy process decides when damping may end.
"""
import gc
import os
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from bcg.transport import TransportConfig, Writer, make_transport

from ..core.command_plan import PLAN_DTYPE, LowCmdComposer
from ..core.safety import check_stale
from .scheduling import advance, request_cpu, request_fifo, wait_until
from .shared_plan import SharedPlan
from .timing_stats import TimingStats

NON_FINITE_REASON = "non-finite joint target (never sent)"
PARENT_GONE_REASON = "policy process exited"
WRITE_FAILED_REASON = "LowCmd write failed"


@dataclass(frozen=True)
class WriterSettings:
    """Everything the writer process needs besides the shared plan (picklable)."""

    transport: TransportConfig
    """Where LowCmd goes; the writer opens its own transport on it."""
    writer_hz: float = 500.0
    """Hz, periodic LowCmd writes."""
    spin_s: float = 0.0
    """s before each deadline spent spinning on the clock instead of sleeping (0: sleep only)."""
    realtime_priority: int = 0
    """SCHED_FIFO priority of the writer (best effort; 0: normal scheduling)."""
    cpu: int = -1
    """CPU the writer is pinned to (best effort; -1: any)."""
    shutdown_damping_s: float = 1.0
    """s of damping when the policy process disappears."""
    parent_pid: int = 0
    """The policy process (its disappearance is detected through the parent pid)."""


class WriterLoop:
    """The write schedule and the writer's own safety checks (no process or transport setup)."""

    def __init__(self, settings: WriterSettings, shared: SharedPlan, writer: Writer,
                 report_fault: Callable[[str], None], clock=time.monotonic):
        self.settings, self.shared, self.writer = settings, shared, writer
        self.report_fault, self.clock = report_fault, clock
        self.composer = LowCmdComposer()
        self.lateness = TimingStats()
        """How late each periodic write started after its deadline."""
        self.latency = TimingStats()
        """LowState received (policy process) -> LowCmd with the targets computed from it written."""
        self.commands_written = 0
        self.commands_woken = 0
        """Of those, written at once when the policy process woke the writer (new targets; in lockstep,
        every LowState) rather than on the schedule."""
        self.latched: str = ""
        """Why the writer damps on its own ('' while it does not)."""
        self._targets_seq = 0
        """`targets_seq` of the newest targets written (their latency is measured once)."""

    def _latch(self, reason: str) -> None:
        """Damp from now on; tell the policy process why. A report that cannot be delivered (the
        process is gone, its pipe broken) never stops the writer: damping is what matters then."""
        if not self.latched:
            self.latched = reason
            try:
                self.report_fault(reason)
            except (OSError, EOFError):
                pass

    def run(self) -> dict:
        """Write until the plan's stop time (or the end of damping after the policy process is gone)."""
        s, clock = self.settings, self.clock
        period, read_timeout = 1.0 / s.writer_hz, 0.5 / s.writer_hz
        records = np.zeros(1, PLAN_DTYPE)
        plan = records[0]
        plan["stop_at"] = np.inf
        stop_at = np.inf
        deadline = clock()
        while True:
            woken = wait_until(deadline, s.spin_s, clock, block=self.shared.wait_for_wake, poll=self.shared.poll_wake)
            now = clock()
            if not woken:
                self.lateness.add(now - deadline)
                deadline = advance(deadline, period, now)
            self.shared.read(records, read_timeout)        # not free in time: the last copy stands
            stop_at = self._watch_parent(now, stop_at)
            if now >= min(stop_at, float(plan["stop_at"])):
                break
            lockstep = bool(plan["lockstep"])
            if not plan["active"] or (lockstep and not woken):
                continue
            if not plan["damping"] and not lockstep:
                reason = check_stale(now - float(plan["state_time"]), float(plan["stale_after_s"]))
                if reason is not None:
                    self._latch(reason)
            self._write(plan, now, woken)
        return {"commands_written": self.commands_written, "commands_woken": self.commands_woken,
                "latency": self.latency.summary(),
                "writer_lateness": self.lateness.summary(), "writer_fault": self.latched or None}

    def _watch_parent(self, now: float, stop_at: float) -> float:
        """The time to stop at: once the policy process is gone, damp for `shutdown_damping_s`, then stop."""
        if os.getppid() != self.settings.parent_pid and stop_at == np.inf:
            self._latch(PARENT_GONE_REASON)
            return now + self.settings.shutdown_damping_s
        return stop_at

    def _write(self, plan, now: float, woken: bool) -> None:
        """Write the plan's command at its time (in lockstep the LowState's, with the LowState clock
        the plan's clock, else now): damping once latched, or when the policy's command is not finite.
        Counts it and, the first time targets are written, their latency from their LowState."""
        lockstep = bool(plan["lockstep"])
        at = float(plan["state_time"]) if lockstep else float(plan["clock_time"]) if plan["state_clock"] else now
        if not self.composer.compose(plan, at, damping=bool(self.latched)):
            self._latch(NON_FINITE_REASON)
            if not self.composer.compose(plan, at, damping=True):
                return
        try:
            self.writer.write(self.composer.cmd)
        except Exception as e:      # the middleware refused it: damp from now on, keep writing
            self._latch(f"{WRITE_FAILED_REASON} ({type(e).__name__}: {e})")
            return
        self.commands_written += 1
        self.commands_woken += woken
        seq = int(plan["targets_seq"])
        if seq != self._targets_seq:
            self._targets_seq = seq
            self.latency.add(self.clock() - float(plan["targets_state_time"]))


def writer_main(settings: WriterSettings, handles: tuple, conn) -> None:
    """Entry point of the writer process (a multiprocessing 'spawn' target).

    Messages to the parent on `conn`: ('ready', scheduling note), ('fault', reason), then
    ('summary', dict) at the end, or ('error', text) when it fails (exit code 1).
    """
    try:
        shared = SharedPlan(*handles)
        note = f"{request_fifo(settings.realtime_priority)}, {request_cpu(settings.cpu)}"
        with make_transport(settings.transport) as transport:
            writer = transport.lowcmd_writer()
            gc.collect()
            gc.freeze()           # everything built so far: never scanned again by the collector
            conn.send(("ready", note))
            summary = WriterLoop(settings, shared, writer, lambda reason: conn.send(("fault", reason))).run()
        _send_if_possible(conn, ("summary", summary))
    except BaseException as e:  # the parent logs it and fails; damping is what the robot then does
        try:
            _send_if_possible(conn, ("error", f"{type(e).__name__}: {e}"))
        finally:
            raise SystemExit(1)


def _send_if_possible(conn, message) -> None:
    """Send to the policy process unless it is gone (its end of the pipe closed)."""
    try:
        conn.send(message)
    except (OSError, EOFError):
        pass
