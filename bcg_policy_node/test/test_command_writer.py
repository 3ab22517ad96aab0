"""The LowCmd writer's loop on its own: what it writes for a plan, the checks it makes by itself, its schedule.

The loop runs in a thread of the test with a recording writer instead of DDS; the plan goes
through real shared memory. Times are the real monotonic clock; nothing is judged by speed.
"""
import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

from bcg.transport import TransportConfig, Writer
from bcg.wire import crc_ok, decode_lowcmd, encode_lowcmd
from bcg_policy_node.core.command_plan import new_plan
from bcg_policy_node.realtime.command_writer import (
    NON_FINITE_REASON,
    PARENT_GONE_REASON,
    WRITE_FAILED_REASON,
    WriterLoop,
    WriterSettings,
)
from bcg_policy_node.realtime.scheduling import PolicySchedule, advance, wait_until
from bcg_policy_node.realtime.shared_plan import SharedPlan

KD_DAMP = 4.0


class Recording(Writer):
    def __init__(self):
        self.commands = []

    def write(self, rec):
        self.commands.append(decode_lowcmd(encode_lowcmd(rec)))


def hold_plan(now):
    """An active HOLD-like plan: q = 0.3 on slots 0..28, kp 50, kd 2, fresh LowState at `now`."""
    plan = new_plan()
    plan["active"], plan["mode_machine"] = True, 5
    plan["mode"][:29] = 1
    plan["q_from"][:29] = plan["q_to"][:29] = 0.3
    plan["kp"][:29], plan["kd"][:29] = 50.0, 2.0
    plan["damping_kd"][:29] = KD_DAMP
    plan["stale_after_s"] = 0.06
    plan["state_time"] = now
    return plan


class RefusesThirdWrite(Recording):
    """The middleware raises on the third write (e.g. a DDS return code < 0)."""

    def write(self, rec):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 3:
            raise OSError("DDS_RETCODE_ERROR")
        super().write(rec)


class RunningWriter:
    """A WriterLoop in a thread on a shared plan; `faults` are what it reported."""

    def __init__(self, plan, parent_pid=None, shutdown_damping_s=0.05, report=None, writer=None):
        self.shared = SharedPlan.create(multiprocessing.get_context("spawn"))
        self.shared.publish(plan)
        self.writer, self.faults, self.summary = writer or Recording(), [], None
        settings = WriterSettings(TransportConfig(), writer_hz=500.0, spin_s=0.0,
                                  shutdown_damping_s=shutdown_damping_s,
                                  parent_pid=os.getppid() if parent_pid is None else parent_pid)
        self.loop = WriterLoop(settings, self.shared, self.writer, report or self.faults.append)
        self.thread = threading.Thread(target=lambda: setattr(self, "summary", self.loop.run()))
        self.thread.start()

    def wait_for(self, predicate, timeout_s=10.0):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if any(predicate(c) for c in list(self.writer.commands)):
                return True
            time.sleep(0.005)
        return False

    def stop(self, plan):
        plan["stop_at"] = time.monotonic()
        self.shared.publish(plan)
        self.thread.join(10.0)
        assert not self.thread.is_alive()
        assert all(np.isfinite(c["motor_cmd"]["q"]).all() and crc_ok(c) for c in self.writer.commands)


def is_damping(cmd):
    m = cmd["motor_cmd"]
    return not m["kp"].any() and (m["kd"][:29] == KD_DAMP).all() and not m["q"].any()


def test_writes_the_plan_and_wakes_for_new_targets():
    plan = hold_plan(time.monotonic() + 3600)          # a LowState "from the future": never stale here
    w = RunningWriter(plan)
    assert w.wait_for(lambda c: c["motor_cmd"]["kp"][0] == 50.0 and c["mode_machine"] == 5)
    plan["q_from"][:29] = plan["q_to"][:29] = -0.2
    plan["targets_seq"], plan["targets_state_time"] = 1, time.monotonic()
    w.shared.publish(plan)
    w.shared.wake_writer()
    assert w.wait_for(lambda c: np.allclose(c["motor_cmd"]["q"][:29], -0.2))
    w.stop(plan)
    assert w.faults == [] and w.summary["latency"]["n"] == 1
    assert w.summary["commands_written"] == len(w.writer.commands) and w.summary["writer_lateness"]["n"] > 0
    m = w.writer.commands[0]["motor_cmd"]
    assert m["mode"][:29].all() and not m["mode"][29:].any() and not m["dq"].any() and not m["tau"].any()


def test_stale_lowstate_damps_without_the_policy_process():
    """The policy process publishes nothing more (as if stuck): the writer damps on its own."""
    plan = hold_plan(time.monotonic())
    w = RunningWriter(plan)
    assert w.wait_for(is_damping)
    assert len(w.faults) == 1 and w.faults[0].startswith("LowState stale: newest is")
    first = next(i for i, c in enumerate(w.writer.commands) if is_damping(c))
    plan["state_time"] = time.monotonic() + 3600      # LowState again: the damping stays latched
    w.shared.publish(plan)
    time.sleep(0.05)
    w.stop(plan)
    assert all(is_damping(c) for c in w.writer.commands[first:])


def test_non_finite_targets_are_never_sent():
    plan = hold_plan(time.monotonic() + 3600)
    plan["q_to"][3] = np.nan
    w = RunningWriter(plan)
    assert w.wait_for(is_damping)
    w.stop(plan)
    assert w.faults == [NON_FINITE_REASON] and all(is_damping(c) for c in w.writer.commands)


def test_a_refused_write_latches_damping_and_writing_goes_on():
    plan = hold_plan(time.monotonic() + 3600)
    w = RunningWriter(plan, writer=RefusesThirdWrite())
    assert w.wait_for(is_damping)
    time.sleep(0.02)
    w.stop(plan)
    assert w.faults == [f"{WRITE_FAILED_REASON} (OSError: DDS_RETCODE_ERROR)"]
    assert not is_damping(w.writer.commands[0]) and all(is_damping(c) for c in w.writer.commands[2:])
    assert len(w.writer.commands) >= 5


@pytest.mark.timeout(30)
def test_policy_process_gone_damps_then_ends():
    """Told another parent pid than this process's: the writer takes it as its policy process having died."""
    plan = hold_plan(time.monotonic() + 3600)
    w = RunningWriter(plan, parent_pid=os.getppid() + 1_000_000, shutdown_damping_s=0.05)
    w.thread.join(10.0)
    assert not w.thread.is_alive() and w.faults == [PARENT_GONE_REASON]
    assert w.writer.commands and all(is_damping(c) for c in w.writer.commands)


def test_a_dead_policy_process_is_damped_even_though_its_pipe_is_broken():
    """The real crash case: reporting the fault raises BrokenPipeError (the parent's end is gone)."""
    def broken_pipe(reason):
        raise BrokenPipeError(32, "Broken pipe")
    plan = hold_plan(time.monotonic() + 3600)
    w = RunningWriter(plan, parent_pid=os.getppid() + 1_000_000, shutdown_damping_s=0.1, report=broken_pipe)
    w.thread.join(10.0)
    assert not w.thread.is_alive() and w.summary is not None
    assert len(w.writer.commands) >= 20 and all(is_damping(c) for c in w.writer.commands)


def test_deadline_schedule_keeps_its_phase_and_resynchronises_after_a_stall():
    assert advance(1.000, 0.002, now=1.0005) == pytest.approx(1.002)     # on time
    assert advance(1.000, 0.002, now=1.0035) == pytest.approx(1.002)     # late, within a period: keep the phase
    assert advance(1.000, 0.002, now=1.0500) == 1.0500                   # stalled: restart from now


def run_schedule(arrivals, period=0.02):
    schedule = PolicySchedule(period)
    steps = []
    for now in arrivals:
        if schedule.arrival(now):
            steps.append(now)
            schedule.stepped(now)
    return np.array(steps)


def test_policy_steps_on_the_lowstate_nearest_each_deadline_despite_jitter():
    """500 Hz LowState jittering by +-50 us around the deadlines (which were set from an arrival):
    every policy interval stays within the jitter of 20 ms, none slips by a LowState interval."""
    rng = np.random.default_rng(0)
    arrivals = np.arange(2000) * 0.002 + rng.uniform(-50e-6, 50e-6, 2000)
    arrivals[0] = 0.0
    intervals = np.diff(run_schedule(arrivals))
    assert intervals.size == 199
    np.testing.assert_allclose(intervals, 0.02, atol=1.1e-4)


def test_policy_schedule_resynchronises_after_a_lowstate_dropout():
    arrivals = np.concatenate([np.arange(50) * 0.002, 0.5 + np.arange(50) * 0.002])   # 400 ms without LowState
    steps = run_schedule(arrivals)
    assert steps[steps < 0.1].tolist() == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])
    assert steps[steps >= 0.5].tolist() == pytest.approx([0.5, 0.52, 0.54, 0.56, 0.58])   # first arrival, then 20 ms


def test_wait_until_blocks_then_spins_and_reports_wake_ups():
    def ticking():
        return iter(np.arange(0.0, 1.0, 0.001)).__next__                  # a clock: 1 ms per read
    blocked = []
    assert not wait_until(0.010, 0.004, ticking(), block=lambda s: blocked.append(s) or False, poll=lambda: False)
    assert blocked == [pytest.approx(0.006)]                               # blocked until 4 ms before
    assert wait_until(0.010, 0.0, lambda: 0.0, block=lambda s: True, poll=lambda: False)
    polls = iter([False, False, True])                                     # woken while spinning
    assert wait_until(0.010, 1.0, ticking(), block=lambda s: False, poll=lambda: next(polls))


def test_in_lockstep_it_answers_each_lowstate_once_at_its_simulated_time_and_echoes_its_tick():
    """Lockstep: nothing on the schedule, one LowCmd per wake-up (a LowState), composed at that
    LowState's simulated time with its tick in reserve[0]; simulated time is never judged stale."""
    plan = hold_plan(1.0)                                  # simulated 1 s: long past on the monotonic clock
    plan["lockstep"], plan["state_tick"] = True, 1000
    plan["q_from"][:29], plan["q_to"][:29] = 0.0, 1.0     # a ramp over simulated 1..2 s
    plan["t_from"], plan["t_to"] = 1.0, 2.0
    w = RunningWriter(plan)
    time.sleep(0.1)
    assert w.writer.commands == []
    for tick in (1250, 1500):
        plan["state_time"], plan["state_tick"] = tick / 1000, tick
        w.shared.publish(plan)
        w.shared.wake_writer()
        assert w.wait_for(lambda c, tick=tick: c["reserve"][0] == tick)
    w.stop(plan)
    assert w.faults == [] and w.summary["commands_written"] == w.summary["commands_woken"] == 2
    assert [int(c["reserve"][0]) for c in w.writer.commands] == [1250, 1500]
    np.testing.assert_allclose([c["motor_cmd"]["q"][0] for c in w.writer.commands], [0.25, 0.5], atol=1e-6)

