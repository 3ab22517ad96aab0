"""The node's threads around `Controller`: LowState receiver + 50 Hz policy, 500 Hz LowCmd writer.

- receiver: blocks on the transport's LowState reader; every sample goes through the safety checks
  and the remote. The policy runs here, on a deadline schedule at the contract's period: on the
  first LowState at or after each deadline (next deadline = previous + period) it builds the
  observation, runs the policy and writes a LowCmd with the new targets at once (the "LowState
  received -> LowCmd written" latency the bench measures).
- writer: on a deadline schedule at `writer_hz` (next = previous deadline + period, never
  sleep-after-work), checks staleness and writes a fresh LowCmd with the latest targets.

`stop()` (stop, SIGINT, SIGTERM) switches to damping, keeps writing it for `shutdown_damping` s,
then ends the threads.
"""
import collections
import json
import logging
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np

from bcg.wire import new_lowcmd

from .controller import Controller
from .state_machine import Phase, Transition

log = logging.getLogger("bcg_policy_node")
STATS_LEN = 200_000


def advance(deadline: float, period: float, now: float) -> float:
    """The next deadline: `deadline + period` (fixed phase), or `now` when that is more than a
    period in the past (resynchronise instead of bursting to catch up)."""
    following = deadline + period
    return following if following >= now - period else now


def sleep_until(deadline: float, clock=time.monotonic) -> None:
    delay = deadline - clock()
    if delay > 0:
        time.sleep(delay)


class EventLog:
    """JSON lines: one per phase transition, flushed at once, and a summary at exit."""

    def __init__(self, path: Optional[str]):
        self.file = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.file = open(path, "w", buffering=1)

    def write(self, record: dict) -> None:
        if self.file is not None:
            self.file.write(json.dumps(record) + "\n")

    def transition(self, t: Transition, state_tick_ms: Optional[int]) -> None:
        """Log `t` with the tick (ms) of the newest LowState (simulated time in simulation)."""
        self.write({"transition": {**t.to_json(), "state_tick_ms": state_tick_ms}})

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class NodeRuntime:
    def __init__(self, controller: Controller, transport, writer_hz: float = 500.0, shutdown_damping_s: float = 1.0,
                 check_state_crc: bool = True, clock=time.monotonic):
        self.controller, self.clock = controller, clock
        self.reader = transport.lowstate_reader(check_crc=check_state_crc)
        self.writer = transport.lowcmd_writer()
        self.writer_period = 1.0 / writer_hz
        self.shutdown_damping_s = shutdown_damping_s
        self.lock = threading.Lock()
        self.state_seq = 0
        self.done = threading.Event()
        self.stop_deadline: Optional[float] = None
        self.error: Optional[BaseException] = None
        self.commands_written = 0
        self.latency_s = collections.deque(maxlen=STATS_LEN)
        """LowState received -> LowCmd with the policy's new targets written, s."""
        self.writer_lateness_s = collections.deque(maxlen=STATS_LEN)
        """How late each 500 Hz write started after its deadline, s."""
        self.policy_step_s = collections.deque(maxlen=STATS_LEN)
        self.threads = [threading.Thread(target=self._guard(f), name=f.__name__, daemon=True)
                        for f in (self._receive_loop, self._writer_loop)]

    def _guard(self, loop):
        def run():
            try:
                loop()
            except BaseException as e:  # a thread that dies must end the node, loudly
                self.error = self.error or e
                log.error("%s failed: %s: %s", loop.__name__, type(e).__name__, e)
                self.done.set()
        return run

    # -- loops -----------------------------------------------------------------------------
    def _receive_loop(self):
        period = self.controller.contract.control_period_s
        deadline = None
        while not self.done.is_set():
            state = self.reader.wait(0.05)
            if state is None:
                continue
            now = self.clock()
            with self.lock:
                self.controller.on_state(state, now)
                self.state_seq += 1
                due = self.stop_deadline is None and (deadline is None or now >= deadline)
                cmd = None
                if due:
                    t0 = time.perf_counter()
                    if self.controller.policy_step(now):
                        self.policy_step_s.append(time.perf_counter() - t0)
                        cmd = self._command(now)
                    deadline = advance(now if deadline is None else deadline, period, now)
            if cmd is not None:
                self.writer.write(cmd)
                self.latency_s.append(self.clock() - now)

    def _writer_loop(self):
        deadline = self.clock()
        while not self.done.is_set():
            sleep_until(deadline, self.clock)
            now = self.clock()
            self.writer_lateness_s.append(now - deadline)
            with self.lock:
                self.controller.tick(now)
                cmd = self._command(now)
                stopping_over = self.stop_deadline is not None and now >= self.stop_deadline
            if cmd is not None:
                self.writer.write(cmd)
            if stopping_over:
                self.done.set()
            deadline = advance(deadline, self.writer_period, self.clock())

    def _command(self, now: float):
        """A fresh LowCmd for `now` (lock held), or None while there is nothing to send."""
        cmd = new_lowcmd()
        if not self.controller.fill_command(cmd, now):
            return None
        self.commands_written += 1
        return cmd

    # -- control ---------------------------------------------------------------------------
    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self, reason: str = "stop requested") -> None:
        """Switch to damping and end after `shutdown_damping_s` (at once if nothing was ever sent)."""
        with self.lock:
            if self.stop_deadline is not None:
                return
            now = self.clock()
            self.stop_deadline = now + self.shutdown_damping_s
            if self.controller.machine.phase is Phase.WAIT or self.controller.mode_machine is None:
                self.done.set()
            self.controller.fault(now, reason)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the node ended (True) or `timeout` passed (False)."""
        return self.done.wait(timeout)

    def join(self) -> None:
        self.done.set()
        for t in self.threads:
            t.join(timeout=2.0)

    def summary(self) -> dict:
        def stats(values):
            a = np.asarray(values, float)
            if a.size == 0:
                return None
            return {"n": int(a.size), "median_ms": float(np.median(a) * 1e3), "p99_ms": float(np.percentile(a, 99) * 1e3),
                    "max_ms": float(a.max() * 1e3)}
        return {"commands_written": self.commands_written, "policy_steps": self.controller.policy_steps,
                "states_received": self.state_seq, "final_phase": self.controller.machine.phase.value,
                "latency": stats(self.latency_s), "writer_lateness": stats(self.writer_lateness_s),
                "policy_step": stats(self.policy_step_s)}
