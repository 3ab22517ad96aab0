"""The node's core without threads or middleware: LowState in, a command plan out, time as an argument.

`Controller.on_state` runs the safety checks and the remote on each LowState (before the node has
commanded motion, in WAIT and ZERO_TORQUE, a LowState that is not yet a robot's, or not finite, is
dropped and counted in `dropped` instead: the robot is not ready, the node keeps waiting), `policy_step`
builds the observation (the contract's spec, `bcg.contract.observation`), runs the policy and
sets new joint targets, `write_plan` describes the current phase's command as a `command_plan`
record, which the LowCmd writer turns into a LowCmd at each write. All methods take the caller's
time in seconds (monotonic, or simulated in lockstep). Not thread-safe: the runtime locks.

Gains: RAMP and HOLD use the hold gains (`JointMap.hold_kp` / `hold_kd`: the stand policy's, which
hold a G1 standing on the ground), BLEND goes from those and the default pose to the policy's gains
and targets over the blend time, POLICY uses the policy's. The policy runs from the first step of
BLEND on: its first observation is the robot standing still at the default pose, last action zero,
at the reference's first frame, as in its starts from rest in training (`rest_deviation`, recorded
in `start_deviation`).

Reference motion: the file's, at the policy's rate, blended in from rest over the contract's
`motion_lead_in_s` as in training (`bcg.motion.lead_in`). Its time: policy step k (k = 0 at the
first step after entering BLEND) samples the motion at k * control period (plus the spec's frames
ahead), as training does; the samples of the next step are prepared by `prepare_next_step`, after
the current step's command is on its way.
Reference heading: with `align_heading`, entering BLEND turns the motion about the vertical so that
its first frame faces where the robot's IMU faces then. The observation sees the reference's
orientation relative to the robot's, the IMU's yaw is arbitrary on a real robot (and 0 in a
simulator), and every training episode starts on the reference's own heading.
"""
import logging
from typing import Callable, List, Optional

import numpy as np

from bcg.contract import ObservationInputs, Policy
from bcg.motion import ReferenceMotion
from bcg.motion.lead_in import LeadIn
from bcg.motion.resample import at_control_rate
from bcg.rotations import heading

from ..config import LOGGER_NAME
from .joint_map import UNSET_MODE_MACHINE, JointMap
from .remote import pressed_keys
from .rest import rest_deviation
from .safety import SafetyLimits, check_action, check_finite, check_ready, check_stale, check_state
from .state_machine import Phase, StateMachine, Transition

log = logging.getLogger(LOGGER_NAME)


NOT_COMMANDED = (Phase.WAIT, Phase.ZERO_TORQUE)
"""Phases in which the node has sent nothing but zero torque."""
STATE_DROP_REASONS = ("non_finite", "not_ready")
"""Why the controller drops a LowState before it has commanded motion (`Controller.dropped`)."""


class Controller:
    """`damping_kd`: N m s/rad in DAMPING, per robot joint (num_joints,) or one for all."""

    def __init__(self, policy: Policy, robot, limits: SafetyLimits, machine: StateMachine, damping_kd,
                 motion: Optional[ReferenceMotion] = None,
                 on_transition: Optional[Callable[[Transition, Optional[int]], None]] = None,
                 align_heading: bool = True):
        self.policy, self.robot, self.contract = policy, robot, policy.contract
        self.limits, self.machine = limits, machine
        self.damping_slots = np.zeros(len(robot.valid_slots))
        """(35,) N m s/rad: the damping gain of each SDK slot's joint."""
        self.damping_slots[robot.motor_slots] = np.broadcast_to(np.asarray(damping_kd, float), (robot.num_joints,))
        self.dropped = dict.fromkeys(STATE_DROP_REASONS, 0)
        """LowStates dropped so far, by reason (before any motion was commanded)."""
        self.on_transition = on_transition or (lambda t, tick: None)
        if self.contract.observation.needs_reference and motion is None:
            raise ValueError("motion: the policy's observation has reference-motion terms "
                             f"({[t.name for t in self.contract.observation.terms if t.frames]}); give --motion")
        self.joints = JointMap.build(self.contract, robot)   # refined by mode_machine at the first LowState
        if motion is not None:           # the frames and joint rates training computed from the same file
            slots = self.joints.slots
            lead_in = LeadIn(self.contract.motion_lead_in_s, self.contract.default_joint_pos, robot.standing_height)
            motion = at_control_rate(motion, 1.0 / self.contract.control_period_s, self.contract.joint_names,
                                     self.joints.q_lower[slots], self.joints.q_upper[slots], lead_in=lead_in)
        self.motion = self.source_motion = motion
        """`motion` as the policy samples it (turned to the robot's heading at the start), and as given,
        both at the policy's rate with the policy's joints (`at_control_rate`, as in training)."""
        self.align_heading = align_heading
        self.heading_offset_rad = 0.0
        """rad: how far the reference was turned about the vertical when the policy started."""
        self.motion_columns = motion.joint_index(self.contract.joint_names) if motion is not None else None
        self._frame_offsets_s = np.asarray(self.contract.observation.frames, float) * self.contract.control_period_s
        self.mode_machine: Optional[int] = None
        self.state: Optional[np.void] = None
        self.state_time = -np.inf
        self.last_action = np.zeros(self.contract.num_joints, np.float32)
        self.policy_q = self.joints.default_q.copy()      # (35,) latest policy targets
        self.ramp_start_q = self.joints.default_q.copy()  # (35,) measured pose when the ramp began
        self.policy_steps = 0
        self.start_deviation: Optional[dict] = None
        """How far the robot was from rest at the policy's first step (`rest.rest_deviation`)."""
        self.plan_version = 0
        """Increments at every transition (the whole command plan changes)."""
        self.targets_version = 0
        """Increments with every new set of policy targets (only the plan's targets change)."""
        self._reference: Optional[tuple] = None
        """The observation's prepared reference terms for policy step `policy_steps`
        (`ObservationSpec.prepare`; None without a motion)."""
        self.prepare_next_step()

    # -- events ----------------------------------------------------------------------------
    def _record(self, t: Optional[Transition]) -> Optional[Transition]:
        if t is not None:
            level = logging.WARNING if t.target is Phase.DAMPING else logging.INFO
            log.log(level, "phase %s -> %s: %s", t.source.value, t.target.value, t.reason)
            if t.target is Phase.RAMP and self.state is not None:
                self.ramp_start_q = np.where(self.joints.valid_slots, self.state["motor_state"]["q"], 0.0)
            if t.target is Phase.BLEND:
                self._face_the_robot()
            self.plan_version += 1
            self.on_transition(t, None if self.state is None else int(self.state["tick"]))
        return t

    def fault(self, now: float, reason: str) -> Optional[Transition]:
        return self._record(self.machine.fault(now, reason))

    def on_state(self, state: np.void, now: float) -> None:
        """A LowState arrived at `now`. Raises JointMapError when the robot variant cannot run the policy."""
        if self.machine.phase in NOT_COMMANDED:
            for reason, why in (("non_finite", check_finite(state, self.joints.valid_index)),
                                ("not_ready", check_ready(state, self.joints.valid_index))):
                if why is not None:
                    self.dropped[reason] += 1
                    if self.machine.phase is Phase.ZERO_TORQUE:
                        self.state_time = now         # the robot is there (zero torque goes on), not stale
                    return
        if self.mode_machine is None:          # set only once the variant is known to fit: nothing is sent before
            self.joints = JointMap.build(self.contract, self.robot, int(state["mode_machine"]))
            self.mode_machine = int(state["mode_machine"])
            if self.mode_machine == UNSET_MODE_MACHINE:
                log.warning("LowState mode_machine is 0 (a simulator that leaves it unset?): driving the robot "
                            "model %s as it is", self.robot.model_path)
        self.state, self.state_time = state, now
        reason = check_state(state, self.joints.valid_index, self.limits)
        if reason is not None:
            if self.machine.phase is Phase.WAIT:
                self._record(self.machine.on_state(now, 0))
            self.fault(now, reason)
            return
        self._record(self.machine.on_state(now, pressed_keys(state["wireless_remote"])))

    def tick(self, now: float) -> None:
        """Staleness and time-driven transitions while no LowState arrives."""
        if self.machine.phase in (Phase.WAIT, Phase.DAMPING):
            return
        reason = check_stale(now - self.state_time, self.stale_after_s)
        if reason is not None:
            self.fault(now, reason)
        else:
            self._record(self.machine.tick(now))

    @property
    def stale_after_s(self) -> float:
        """s: LowState older than this is a fault."""
        return self.limits.stale_limit_s

    # -- policy ----------------------------------------------------------------------------
    def _face_the_robot(self) -> None:
        """Turn the reference so its first frame's heading is the robot's now (`align_heading`)."""
        if self.source_motion is None or not self.align_heading or self.state is None:
            return
        robot = heading(self.state["imu_state"]["quaternion"].astype(np.float64))
        offset = float(np.angle(np.exp(1j * (robot - heading(self.source_motion.root_quat[0])))))
        self.heading_offset_rad = offset
        self.motion = self.source_motion.turned(offset)
        self.prepare_next_step()
        log.info("reference motion turned by %.1f deg about the vertical to the robot's heading", np.degrees(offset))

    def prepare_next_step(self) -> None:
        """Sample the reference motion for the next policy step (no-op without a motion)."""
        if self.motion is not None:
            c = self.contract
            t = self.policy_steps * c.control_period_s + self._frame_offsets_s
            self._reference = c.observation.prepare(self.motion.sample(t, self.motion_columns), c.default_joint_pos)

    def observation(self) -> np.ndarray:
        """The observation (obs,) float32 from the latest LowState and the prepared reference."""
        s, c = self.state, self.contract
        motors, imu = s["motor_state"], s["imu_state"]
        slots = self.joints.slots
        inputs = ObservationInputs(base_quat=imu["quaternion"].astype(np.float64),
                                   base_ang_vel=imu["gyroscope"].astype(np.float64),
                                   joint_pos=motors["q"][slots].astype(np.float64),
                                   joint_vel=motors["dq"][slots].astype(np.float64),
                                   last_action=self.last_action, default_joint_pos=c.default_joint_pos)
        return c.observation.build(inputs, self._reference)

    def policy_step(self, now: float) -> bool:
        """Run the policy once on the latest LowState (only in BLEND and POLICY); True when targets changed."""
        if not self.machine.runs_policy or self.state is None:
            return False
        if self.policy_steps == 0:
            self.start_deviation = rest_deviation(self.state, self.joints.slots, self.contract.default_joint_pos)
            log.info("the policy's first observation, from rest: %s", self.start_deviation)
        action = self.policy(self.observation())
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
        self.targets_version += 1
        return True

    # -- command ---------------------------------------------------------------------------
    def write_plan(self, plan: np.void) -> None:
        """Describe the current phase's command in `plan` (a `command_plan.PLAN_DTYPE` record).

        WAIT (or no mode_machine yet): inactive, nothing is sent. ZERO_TORQUE: kp = kd = 0. RAMP:
        from the measured pose to the default pose over the ramp time, hold gains. HOLD: the default
        pose, hold gains. BLEND: from the default pose and the hold gains to the policy's targets and
        gains over the blend time. POLICY: the policy's targets and gains. DAMPING: kp = 0, kd =
        damping gain. Targets are clipped to the joint limits (a ramp between clipped ends stays
        inside them).
        """
        phase, j, m = self.machine.phase, self.joints, self.machine
        plan["active"] = phase is not Phase.WAIT and self.mode_machine is not None
        plan["damping"] = phase is Phase.DAMPING
        plan["mode_machine"] = self.mode_machine or 0
        plan["mode"] = j.valid_slots
        plan["damping_kd"] = np.where(j.valid_slots, self.damping_slots, 0.0)
        plan["stale_after_s"] = self.stale_after_s
        plan["t_from"] = plan["t_to"] = m.entered_s
        plan["kp_from"], plan["kd_from"] = j.hold_kp, j.hold_kd
        plan["kp"], plan["kd"] = j.hold_kp, j.hold_kd
        if phase in (Phase.WAIT, Phase.ZERO_TORQUE, Phase.DAMPING):
            plan["q_from"] = plan["q_to"] = 0.0
            plan["kp_from"] = plan["kd_from"] = plan["kp"] = plan["kd"] = 0.0
        elif phase is Phase.RAMP:
            plan["q_from"], plan["q_to"] = j.clip(self.ramp_start_q), j.clip(j.default_q)
            plan["t_to"] = m.entered_s + m.ramp_duration_s
        elif phase is Phase.HOLD:
            plan["q_from"] = plan["q_to"] = j.clip(j.default_q)
        else:
            plan["kp"], plan["kd"] = j.kp, j.kd
            if phase is Phase.BLEND:
                plan["t_to"] = m.entered_s + m.blend_duration_s
            else:
                plan["kp_from"], plan["kd_from"] = j.kp, j.kd
            plan["q_from"] = j.clip(j.default_q)
            self.write_targets(plan)

    def write_targets(self, plan: np.void) -> None:
        """Only the policy's targets into `plan` (all that changes between two transitions): BLEND
        blends towards them from the default pose, POLICY commands them."""
        plan["q_to"] = self.policy_q
        if self.machine.phase is Phase.POLICY:
            plan["q_from"] = self.policy_q

    @property
    def transitions(self) -> List[Transition]:
        return self.machine.transitions
