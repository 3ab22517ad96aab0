"""The node's core without threads or middleware: LowState in, LowCmd out, time as an argument.

`Controller.on_state` runs the safety checks and the remote on each LowState, `policy_step`
builds the observation (the contract's spec, `bcg.contract.observation`), runs the policy and
sets new joint targets, `fill_command` writes the current phase's command into a fresh LowCmd.
All methods take the caller's monotonic time in seconds. Not thread-safe: the runtime locks.
"""
import logging
from typing import Callable, List, Optional

import numpy as np

from bcg.contract import ObservationInputs, Policy, ReferenceMotion
from bcg.robot import NUM_MOTOR_SLOTS

from .joint_map import JointMap
from .remote import pressed_keys
from .safety import SafetyLimits, check_action, check_stale, check_state
from .state_machine import Phase, StateMachine, Transition

log = logging.getLogger("bcg_policy_node")


class Controller:
    def __init__(self, policy: Policy, robot, limits: SafetyLimits, machine: StateMachine, damping_kd: float,
                 motion: Optional[ReferenceMotion] = None,
                 on_transition: Optional[Callable[[Transition, Optional[int]], None]] = None):
        self.policy, self.robot, self.contract = policy, robot, policy.contract
        self.limits, self.machine, self.damping_kd = limits, machine, float(damping_kd)
        self.on_transition = on_transition or (lambda t, tick: None)
        if self.contract.observation.needs_reference and motion is None:
            raise ValueError("motion: the policy's observation has reference-motion terms "
                             f"({[t.name for t in self.contract.observation.terms if t.frames]}); give --motion")
        self.motion = motion
        self.motion_columns = motion.joint_index(self.contract.joint_names) if motion is not None else None
        self.joints = JointMap.build(self.contract, robot)   # refined by mode_machine at the first LowState
        self.mode_machine: Optional[int] = None
        self.state: Optional[np.void] = None
        self.state_time = -np.inf
        self.last_action = np.zeros(self.contract.num_joints, np.float32)
        self.policy_q = self.joints.default_q.copy()      # (35,) latest policy targets
        self.ramp_start_q = self.joints.default_q.copy()  # (35,) measured pose when the ramp began
        self.policy_steps = 0

    # -- events ----------------------------------------------------------------------------
    def _record(self, t: Optional[Transition]) -> Optional[Transition]:
        if t is not None:
            level = logging.WARNING if t.target is Phase.DAMPING else logging.INFO
            log.log(level, "phase %s -> %s: %s", t.source.value, t.target.value, t.reason)
            if t.target is Phase.RAMP and self.state is not None:
                self.ramp_start_q = np.where(self.joints.valid_slots, self.state["motor_state"]["q"], 0.0)
            self.on_transition(t, None if self.state is None else int(self.state["tick"]))
        return t

    def fault(self, now: float, reason: str) -> Optional[Transition]:
        return self._record(self.machine.fault(now, reason))

    def on_state(self, state: np.void, now: float) -> None:
        """A LowState arrived at `now`. Raises JointMapError when the robot variant cannot run the policy."""
        if self.mode_machine is None:
            self.mode_machine = int(state["mode_machine"])
            self.joints = JointMap.build(self.contract, self.robot, self.mode_machine)
        self.state, self.state_time = state, now
        reason = check_state(state, self.joints.valid_slots, self.limits)
        if reason is not None:
            if self.machine.phase is Phase.WAIT:
                self._record(self.machine.on_state(now, 0))
            self.fault(now, reason)
            return
        self._record(self.machine.on_state(now, pressed_keys(state["wireless_remote"])))

    def tick(self, now: float) -> None:
        """Periodic checks (staleness) and time-driven transitions; call at the writer rate."""
        if self.machine.phase in (Phase.WAIT, Phase.DAMPING):
            return
        reason = check_stale(now - self.state_time, self.contract.control_period_s, self.limits)
        if reason is not None:
            self.fault(now, reason)
        else:
            self._record(self.machine.tick(now))

    # -- policy ----------------------------------------------------------------------------
    def observation(self, now: float) -> np.ndarray:
        """The observation (obs,) float32 from the latest LowState."""
        s, c = self.state, self.contract
        motors = s["motor_state"]
        reference = None
        if self.motion is not None:
            t = (now - self.machine.entered_s) + np.asarray(c.observation.frames, float) * c.control_period_s
            reference = self.motion.sample(t, self.motion_columns)
        inputs = ObservationInputs(base_quat=s["imu_state"]["quaternion"].astype(np.float64),
                                   base_ang_vel=s["imu_state"]["gyroscope"].astype(np.float64),
                                   joint_pos=motors["q"][self.joints.slots].astype(np.float64),
                                   joint_vel=motors["dq"][self.joints.slots].astype(np.float64),
                                   last_action=self.last_action, default_joint_pos=c.default_joint_pos,
                                   reference=reference)
        return c.observation.build(inputs)

    def policy_step(self, now: float) -> bool:
        """Run the policy once on the latest LowState (only in POLICY); True when targets changed."""
        if self.machine.phase is not Phase.POLICY or self.state is None:
            return False
        action = self.policy(self.observation(now))
        reason = check_action(action)
        if reason is not None:
            self.fault(now, reason)
            return False
        c = self.contract
        q = self.joints.default_q.copy()
        q[self.joints.slots] = c.default_joint_pos + c.action_scale * action
        self.policy_q = self.joints.clip(q)
        self.last_action = action.astype(np.float32)
        self.policy_steps += 1
        return True

    # -- command ---------------------------------------------------------------------------
    def targets(self, now: float):
        """(q, dq, kp, kd) slot arrays (35,) of the current phase; None in WAIT."""
        phase, j = self.machine.phase, self.joints
        zero = np.zeros(NUM_MOTOR_SLOTS)
        if phase is Phase.WAIT:
            return None
        if phase is Phase.ZERO_TORQUE:
            return zero, zero, zero, zero
        if phase is Phase.DAMPING:
            return zero, zero, zero, np.where(j.valid_slots, self.damping_kd, 0.0)
        if phase is Phase.RAMP:
            a = self.machine.ramp_fraction(now)
            q = j.clip((1 - a) * self.ramp_start_q + a * j.default_q)
        elif phase is Phase.HOLD:
            q = j.clip(j.default_q)
        else:
            q = self.policy_q
        return q, zero, j.kp, j.kd

    def fill_command(self, cmd: np.void, now: float) -> bool:
        """Write the current command into a fresh LowCmd record; False (nothing to send) in WAIT."""
        t = self.targets(now)
        if t is None or self.mode_machine is None:
            return False
        q, dq, kp, kd = t
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(kp)) and np.all(np.isfinite(kd))):
            self.fault(now, "non-finite joint target (never sent)")
            q, dq, kp, kd = self.targets(now)
        cmd["mode_pr"] = 0
        cmd["mode_machine"] = self.mode_machine
        m = cmd["motor_cmd"]
        m["mode"] = self.joints.valid_slots.astype(np.uint8)
        m["q"], m["dq"], m["kp"], m["kd"], m["tau"] = q, dq, kp, kd, 0.0
        return True

    @property
    def transitions(self) -> List[Transition]:
        return self.machine.transitions
