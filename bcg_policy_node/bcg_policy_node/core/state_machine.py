"""The node's operating phases, as a pure state machine (no clocks, no I/O: time is an argument).

    WAIT --first LowState--> ZERO_TORQUE --start / autostart--> RAMP --ramp time--> HOLD
    HOLD --A / autostart (after autostart_hold_s)--> BLEND --blend time--> POLICY
    any phase but WAIT --select, B, a safety fault or stop--> DAMPING (latched: leaving it needs a restart)

The hand-over: RAMP and HOLD drive the robot with gains that hold a G1 standing (the stand
policy's), whatever the policy's own; in BLEND the policy already runs (its first observation is
the standing robot at the default pose, as its starts from rest in training) while the command's
targets and gains go from the hold's to the policy's over `blend_duration_s`.

A fault while still in WAIT also latches DAMPING (it is published once a LowState gives the
robot's mode_machine). Every transition is recorded with its time and reason.
"""
import enum
from dataclasses import dataclass, field
from typing import List, Optional

from .remote import key_mask

START, RUN, STOP = key_mask("start"), key_mask("A"), key_mask("select") | key_mask("B")


class Phase(enum.Enum):
    WAIT = "wait"                 # no LowState yet: publish nothing
    ZERO_TORQUE = "zero_torque"   # kp = kd = 0
    RAMP = "ramp"                 # interpolate from the measured pose to the default pose
    HOLD = "hold"                 # PD on the default pose
    BLEND = "blend"               # the policy runs; targets and gains blend from the hold's to the policy's
    POLICY = "policy"             # PD on the policy's targets
    DAMPING = "damping"           # kp = 0, kd = damping gain


@dataclass(frozen=True)
class Transition:
    time_s: float
    source: Phase
    target: Phase
    reason: str

    def to_json(self) -> dict:
        return {"time_s": round(self.time_s, 6), "from": self.source.value, "to": self.target.value,
                "reason": self.reason}


@dataclass
class StateMachine:
    """Phase logic. Call `on_state` for each LowState (its key bits), `tick` periodically, `fault` on a fault."""

    ramp_duration_s: float = 2.0
    """s, ramp from the measured pose to the default pose."""
    autostart: bool = False
    """Leave zero torque and start the policy without the remote (simulation)."""
    autostart_hold_s: float = 0.5
    """s in HOLD before autostart starts the policy."""
    blend_duration_s: float = 0.25
    """s of BLEND: from the hold's targets and gains to the policy's (0: none, straight to POLICY)."""
    phase: Phase = Phase.WAIT
    entered_s: float = 0.0
    """Time the current phase was entered."""
    transitions: List[Transition] = field(default_factory=list)

    def _go(self, now: float, target: Phase, reason: str) -> Transition:
        t = Transition(now, self.phase, target, reason)
        self.phase, self.entered_s = target, now
        self.transitions.append(t)
        return t

    def fraction(self, now: float) -> float:
        """0..1 progress of the current RAMP or BLEND (1 in any other phase)."""
        length = {Phase.RAMP: self.ramp_duration_s, Phase.BLEND: self.blend_duration_s}.get(self.phase, 0.0)
        if length <= 0:
            return 1.0
        return min(1.0, max(0.0, (now - self.entered_s) / length))

    @property
    def runs_policy(self) -> bool:
        """The policy runs in this phase (BLEND, POLICY)."""
        return self.phase in (Phase.BLEND, Phase.POLICY)

    def on_state(self, now: float, keys: int) -> Optional[Transition]:
        """A LowState arrived with remote key bits `keys`."""
        if self.phase is Phase.WAIT:
            return self._go(now, Phase.ZERO_TORQUE, "first LowState received")
        if self.phase is Phase.DAMPING:
            return None
        if keys & STOP:
            return self._go(now, Phase.DAMPING, "remote: select/B pressed")
        if self.phase is Phase.ZERO_TORQUE and keys & START:
            return self._go(now, Phase.RAMP, "remote: start pressed")
        if self.phase is Phase.HOLD and keys & RUN:
            return self._go(now, Phase.BLEND, "remote: A pressed")
        return self.tick(now)

    def tick(self, now: float) -> Optional[Transition]:
        """Time-driven transitions (ramp end, autostart, blend end)."""
        if self.phase is Phase.ZERO_TORQUE and self.autostart:
            return self._go(now, Phase.RAMP, "autostart")
        if self.phase is Phase.RAMP and self.fraction(now) >= 1.0:
            return self._go(now, Phase.HOLD, "ramp complete")
        if self.phase is Phase.HOLD and self.autostart and now - self.entered_s >= self.autostart_hold_s:
            return self._go(now, Phase.BLEND, "autostart")
        if self.phase is Phase.BLEND and self.fraction(now) >= 1.0:
            return self._go(now, Phase.POLICY, "blend complete")
        return None

    def fault(self, now: float, reason: str) -> Optional[Transition]:
        """A safety fault or a stop request: go to DAMPING (once)."""
        if self.phase is Phase.DAMPING:
            return None
        return self._go(now, Phase.DAMPING, reason)
