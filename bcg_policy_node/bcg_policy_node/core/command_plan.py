"""The command plan: what the LowCmd writer sends, as one fixed-layout record it can read from shared memory.

The controller (`Controller.write_plan`) describes the current phase's command once per change;
the writer evaluates it at each write (`LowCmdComposer.compose`), so a ramp or a blend stays smooth
at the writer rate without the controller doing anything per write: targets and gains go linearly
from their `_from` values at `t_from` to `q_to`, `kp`, `kd` at `t_to`, and stay there. Slot arrays
are (35,). Times are monotonic-clock seconds, shared by both processes (CLOCK_MONOTONIC is
system-wide), except in lockstep, where the times of the controller (`t_from`, `t_to`,
`state_time`) are the simulated seconds of the LowState ticks and the writer composes at
`state_time` (`stop_at` and `targets_state_time` stay on the monotonic clock), and except with
`state_clock` (`lowstate_clock`), where the controller's times are those of the LowState clock
(`core.state_clock`), the writer composes at `clock_time` (that clock at the newest LowState) and
`state_time` stays the monotonic arrival of the newest LowState (staleness on the wall clock).
"""
import numpy as np

from bcg.wire import LOWCMD, NUM_MOTORS

PLAN_DTYPE = np.dtype([
    ("active", "?"),                        # False: nothing is sent (WAIT, no mode_machine yet)
    ("damping", "?"),                       # DAMPING: kp = 0, kd = damping_kd, q = dq = tau = 0
    ("mode_machine", "u1"),                 # echoed from LowState
    ("mode", "u1", (NUM_MOTORS,)),          # motor mode: 1 on the slots the robot drives
    ("q_from", "f8", (NUM_MOTORS,)),        # rad, target at t_from
    ("q_to", "f8", (NUM_MOTORS,)),          # rad, target from t_to on (linear in between)
    ("t_from", "f8"),                       # s
    ("t_to", "f8"),                         # s
    ("kp_from", "f8", (NUM_MOTORS,)),       # N m/rad, gains at t_from
    ("kd_from", "f8", (NUM_MOTORS,)),       # N m s/rad
    ("kp", "f8", (NUM_MOTORS,)),            # N m/rad, gains from t_to on (linear in between)
    ("kd", "f8", (NUM_MOTORS,)),            # N m s/rad
    ("damping_kd", "f8", (NUM_MOTORS,)),    # N m s/rad in damping
    ("stale_after_s", "f8"),                # s: the writer damps when state_time is older than this
    ("state_time", "f8"),                   # s: arrival of the newest LowState
    ("targets_seq", "u8"),                  # increments with each new set of policy targets
    ("targets_state_time", "f8"),           # s: arrival of the LowState those targets were computed from
    ("stop_at", "f8"),                      # s: the writer ends at this time (inf: keep running)
    ("lockstep", "?"),                      # simulated time: one LowCmd per LowState, composed at state_time
    ("state_tick", "u4"),                   # tick of the newest LowState (lockstep: echoed in LowCmd reserve[0])
    ("state_clock", "?"),                   # lowstate_clock: compose at clock_time, staleness on state_time
    ("clock_time", "f8"),                   # s: the controller's (LowState) clock at the newest LowState
])
"""One command plan record (the writer's only input)."""


def new_plan() -> np.void:
    """An inactive plan that never stops by itself."""
    plan = np.zeros(1, PLAN_DTYPE)[0]
    plan["state_time"] = -np.inf
    plan["stop_at"] = np.inf
    return plan


def ramp_fraction(plan: np.void, now: float) -> float:
    """0..1: how far `now` is from t_from to t_to (1 when they are equal)."""
    t_from, t_to = float(plan["t_from"]), float(plan["t_to"])
    if t_to <= t_from:
        return 1.0
    return min(1.0, max(0.0, (now - t_from) / (t_to - t_from)))


class LowCmdComposer:
    """Writes a plan's command at a given time into one reused LowCmd record (`self.cmd`).

    Every member that varies is rewritten at each `compose` (mode_machine, mode, q, kp, kd, and
    reserve[0]: the tick of the LowState answered in lockstep, 0 otherwise); dq, tau, mode_pr and
    the rest of reserve stay 0. The values are checked after their conversion to the wire's
    float32: a non-finite target is never composed.
    """

    def __init__(self):
        self._records = np.zeros(1, LOWCMD.dtype)
        self.cmd = self._records[0]
        motors = self.cmd["motor_cmd"]
        self._mode, self._q, self._kp, self._kd = motors["mode"], motors["q"], motors["kp"], motors["kd"]

    def compose(self, plan: np.void, now: float, damping: bool = False) -> bool:
        """The command of `plan` at `now` (damping when `damping` or the plan says so) into `self.cmd`.

        Returns False, leaving no usable command, when a value would be NaN or Inf on the wire.
        """
        with np.errstate(over="ignore", invalid="ignore"):       # checked below instead
            if damping or plan["damping"]:
                self._q[:] = 0.0
                self._kp[:] = 0.0
                self._kd[:] = plan["damping_kd"]
            else:
                a = ramp_fraction(plan, now)
                for out, start, end in ((self._q, "q_from", "q_to"), (self._kp, "kp_from", "kp"),
                                        (self._kd, "kd_from", "kd")):
                    if a >= 1.0:
                        out[:] = plan[end]
                    else:
                        out[:] = plan[start] + a * (plan[end] - plan[start])
            self._mode[:] = plan["mode"]
            self.cmd["mode_machine"] = plan["mode_machine"]
            self.cmd["reserve"][0] = plan["state_tick"] if plan["lockstep"] else 0
            return bool(np.isfinite(self._q.sum() + self._kp.sum() + self._kd.sum()))
