"""The bridge loop: physics steps, LowCmd polling, LowState publishing, pacing and observers.

Per physics step: take every LowCmd that arrived since the last step and let the gate accept or
reject each (so the counts are those of what the controller sent), apply the command in force
(latest accepted, or damping after the timeout), the elastic band, one `mj_step`. Every
`steps_per_state` steps: fill and publish a LowState, sample the metrics, queue a frame for the
recorder (rendered in its own thread), sync the viewer, and (unless `fast`) sleep until the wall
clock catches up. Before the first valid LowCmd the robot is held still at simulated time 0
(`wait_for_command`). In lockstep, once a LowCmd was accepted, each state period starts only when
the LowCmd answering the last LowState (its tick echoed in reserve[0]) has arrived. Rejected
LowCmds are reported as the node reports dropped LowStates (`DropLog`: the first of each reason at
once, then a summary every few seconds, the totals at the end).
Transport-agnostic: it sees only a `Reader` of LowCmd and a `Writer` of LowState. Emulating
Unitree's simulator (`config.emulate`), the gate and the LowState are that simulator's
(`unitree_emulation.py`), and zero LowStates precede the first step.
"""
import logging
import threading
import time
from typing import Any, Dict, Optional

import mujoco
import numpy as np

from bcg.motion import ReferenceMotion
from bcg.mujoco_plant import PhysicsCore
from bcg.robot import RobotDescription
from bcg.transport import Reader, Writer
from bcg.transport.drop_log import DropLog
from bcg.wire import new_lowstate

from .command_gate import REJECT_REASONS, CommandGate
from .config import LOCKSTEP_TIMEOUT_S, LOGGER_NAME, START_JOINT_NOISE_RAD, BridgeConfig
from .elastic_band import ElasticBand
from .lowstate_fill import LowStateFiller
from .metrics import RunMetrics
from .unitree_emulation import PRESTEP_STATES, ExplicitPdCommands

MAX_PACING_LAG_S = 0.05
"""Wall-clock seconds the paced loop may fall behind before it stops trying to catch up."""
RESEND_S = 0.1
"""Wall seconds in lockstep after which an unanswered LowState is published again (a lost sample)."""
log = logging.getLogger(LOGGER_NAME)


def rejection_texts(robot: RobotDescription) -> dict:
    """What each of `REJECT_REASONS` means, and what to do about it (for the bridge's log)."""
    return {"crc": "CRC mismatch (the sender does not set the robot's CRC on LowCmd)",
            "mode_machine": f"mode_machine is not the robot's {robot.mode_machine} (echo LowState's mode_machine)",
            "non_finite": "non-finite value in a motor command"}


def perturb_start(core: PhysicsCore, seed: int) -> None:
    """A start drawn from `seed`: the robot turned about the vertical by a uniform heading and every
    joint angle plus N(0, START_JOINT_NOISE_RAD^2) rad (`BridgeConfig.seed`)."""
    rng = np.random.default_rng(seed)
    data, robot = core.data, core.robot
    data.qpos[robot.joint_qpos_adr] += rng.normal(0.0, START_JOINT_NOISE_RAD, robot.num_joints)
    yaw = rng.uniform(-np.pi, np.pi)
    root = int(core.model.jnt_qposadr[core.model.body_jntadr[robot.root_body]])
    data.qpos[root + 3:root + 7] = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
    mujoco.mj_forward(core.model, data)


class SimBridge:
    """A simulated G1 behind a LowCmd reader and a LowState writer (both optional, for tests)."""

    def __init__(self, config: BridgeConfig, robot: RobotDescription,
                 commands: Optional[Reader] = None, states: Optional[Writer] = None,
                 motion: Optional[ReferenceMotion] = None):
        self.config = config
        self.core = PhysicsCore(robot, config.physics_hz, config.initial_pose)
        if config.seed >= 0:
            perturb_start(self.core, config.seed)
        kd = robot.damping_kd if config.damping_kd < 0 else config.damping_kd
        self.gate = (ExplicitPdCommands(robot, self.core.model, self.core.data) if config.emulate else
                     CommandGate(robot, config.command_timeout, kd))
        self.rejections = DropLog("LowCmd", rejection_texts(robot), verb="rejected")
        self.lowstate = new_lowstate()
        self.filler = LowStateFiller(self.core.model, robot, self.lowstate, as_robot=not config.emulate,
                                     tick=not config.emulate or config.lockstep)
        self.metrics = RunMetrics(self.core.model, robot, config.fall_height, motion, config.motion_start)
        self.band = None
        if config.elastic_band:
            self.band = ElasticBand.above_body(
                self.core.model, self.core.data, config.band_body, config.band_anchor_height,
                config.band_stiffness, config.band_damping, config.band_length, config.band_mode)
        self.commands, self.states = commands, states
        self.recorder = None
        """Optional `display.Recorder`, fed after every state period."""
        self.viewer = None
        """Optional `display.Viewer`, synced after every state period."""
        self.steps = 0
        self.held_s: Optional[float] = None
        """Wall seconds the robot was held still before the first valid LowCmd (None: not held)."""
        self.lockstep_answers = 0
        """LowStates answered in lockstep."""
        self.lockstep_ended_at: Optional[float] = None
        """Simulated time at which lockstep ended for want of an answer (None: it did not)."""
        self.states_published = 0
        self.pacing_slips = 0
        self.wall_time = 0.0

    def physics_step(self) -> None:
        """One physics step under the command in force (after taking a new LowCmd, if any)."""
        core, now = self.core, self.core.time
        if self.commands is not None:
            for rec in self.commands.take_all():     # every sample: each is validated and counted
                self.gate.offer(rec, now)
        command = self.gate.command(now)
        if command is not core.command:
            core.apply(command)
        if self.band is not None and self.band.attached:
            if 0 < self.config.band_release_time <= now:
                self.band.release(core.data)
            else:
                self.band.apply(core.data)
        core.step()
        self.steps += 1

    def publish_state(self) -> None:
        """Fill the LowState from the sensors and publish it (the writer sets the CRC)."""
        self.filler.fill(self.core.data)
        if self.states is not None:
            self.states.write(self.lowstate)
        self.states_published += 1

    def report_rejections(self) -> None:
        """Log what `rejections` has to say about the gate's counters now (wall clock)."""
        line = self.rejections.update(self.gate.rejected, time.monotonic())
        if line is not None:
            log.warning("%s", line)

    def state_period(self) -> bool:
        """Advance one state period and do what follows it; False when the viewer was closed."""
        for _ in range(self.config.steps_per_state):
            self.physics_step()
        self.report_rejections()
        self.publish_state()
        data = self.core.data
        self.metrics.sample(data)
        if self.recorder is not None:
            self.recorder.maybe_capture(data)
        if self.viewer is not None:
            return self.viewer.maybe_sync(time.perf_counter())
        return True

    def wait_for_first_command(self, stop: threading.Event, timeout_s: float) -> bool:
        """Hold the robot still: publish LowState at the state rate (wall clock, simulated time frozen)
        until a valid LowCmd arrives or `timeout_s` wall seconds pass (-1: no limit); every LowCmd that
        arrived is offered to the gate. True when a valid one did."""
        start = time.perf_counter()
        deadline = start + timeout_s if timeout_s >= 0 else np.inf
        period = 1.0 / self.config.state_hz
        accepted = self.gate.accepted
        while self.commands is not None and not stop.is_set() and time.perf_counter() < deadline:
            self.publish_state()
            for rec in self.commands.wait_all(period):   # every sample: each is validated and counted
                self.gate.offer(rec, self.core.time)
            self.report_rejections()
            if self.gate.accepted > accepted:
                self.held_s = time.perf_counter() - start
                return True
        return False

    def await_answer(self, stop: threading.Event) -> None:
        """Lockstep: take LowCmds (each offered to the gate) until one answers the LowState last
        published (echoes its tick in reserve[0]); republish that LowState every RESEND_S; after
        LOCKSTEP_TIMEOUT_S wall seconds without an answer, end lockstep (logged)."""
        tick = int(self.lowstate["tick"])
        start = resent = time.perf_counter()
        while not stop.is_set():
            answered = False
            for rec in self.commands.wait_all(RESEND_S):
                answered |= self.gate.offer(rec, self.core.time) is None and int(rec["reserve"][0]) == tick
            if answered:
                self.lockstep_answers += 1
                return
            now = time.perf_counter()
            if now - start > LOCKSTEP_TIMEOUT_S:
                self.lockstep_ended_at = self.core.time
                log.warning("lockstep: no LowCmd answered the LowState of tick %d in %g s; stepping on without "
                            "waiting (is the controller running with --lockstep?)", tick, LOCKSTEP_TIMEOUT_S)
                return
            if now - resent > RESEND_S and self.states is not None:
                self.states.write(self.lowstate)
                resent = now

    def in_lockstep(self) -> bool:
        """Lockstep applies now: asked for, a LowCmd accepted, not ended for want of an answer."""
        return (self.config.lockstep and self.commands is not None and self.gate.accepted > 0
                and self.lockstep_ended_at is None)

    def publish_prestep_states(self, stop: threading.Event) -> None:
        """Unitree's simulator before its first physics step: PRESTEP_STATES all-zero LowStates at the
        state rate (wall clock)."""
        zero, period = new_lowstate(), 1.0 / self.config.state_hz
        for _ in range(PRESTEP_STATES):
            if stop.is_set():
                return
            if self.states is not None:
                self.states.write(zero)
            time.sleep(period)

    def run(self, stop: Optional[threading.Event] = None) -> None:
        """Run until `config.duration` simulated seconds have passed (0: forever) or `stop` is set."""
        stop = stop or threading.Event()
        c = self.config
        if c.emulate:
            self.publish_prestep_states(stop)
        elif c.wait_for_command != 0 and self.commands is not None:
            log.info("holding the robot still at simulated time 0 until the first valid LowCmd%s "
                     "(wait_for_command; 0: simulate from the start)",
                     "" if c.wait_for_command < 0 else f" or {c.wait_for_command:g} s")
            if self.wait_for_first_command(stop, c.wait_for_command):
                log.info("first valid LowCmd after %.1f s: simulating%s", self.held_s,
                         " in lockstep with the controller" if c.lockstep else "")
        end = c.duration - 0.5 * self.core.dt if c.duration > 0 else np.inf
        start_wall = time.perf_counter()
        base_wall, base_sim = start_wall, self.core.time
        self.publish_state()
        self.metrics.sample(self.core.data)
        try:
            while not stop.is_set() and self.core.time < end:
                lockstep = self.in_lockstep()
                if lockstep:
                    self.await_answer(stop)
                if not self.state_period():
                    break
                if c.fast or lockstep:
                    continue
                lag = time.perf_counter() - (base_wall + self.core.time - base_sim)
                if lag < 0:
                    time.sleep(-lag)
                elif lag > MAX_PACING_LAG_S:
                    self.pacing_slips += 1
                    base_wall, base_sim = time.perf_counter(), self.core.time
        finally:
            self.wall_time = time.perf_counter() - start_wall

    def report(self) -> Dict[str, Any]:
        """Everything the metrics JSON holds: run, commands, evaluation."""
        robot, c = self.core.robot, self.config
        received = self.commands.received if self.commands is not None else 0
        sim_time = self.core.time
        return {
            "model": str(robot.model_path),
            "emulate": c.emulate,
            "num_joints": robot.num_joints,
            "mode_machine": robot.mode_machine,
            "physics_hz": c.physics_hz,
            "state_hz": c.state_hz,
            "fast": c.fast,
            "sim_time_s": sim_time,
            "wall_time_s": self.wall_time,
            "real_time_factor": sim_time / self.wall_time if self.wall_time > 0 else None,
            "physics_steps": self.steps,
            "states_published": self.states_published,
            "pacing_slips": self.pacing_slips,
            "elastic_band": None if self.band is None else {"attached_at_end": self.band.attached},
            "held_before_first_command_s": self.held_s,
            "lockstep": None if not c.lockstep else {"answers": self.lockstep_answers,
                                                     "ended_at_s": self.lockstep_ended_at},
            "commands": {
                "accepted": self.gate.accepted,
                "rejected": dict(self.gate.rejected),
                "rejected_total": sum(self.gate.rejected[r] for r in REJECT_REASONS),
                "received": received,
                "damping_fallbacks": self.gate.timeouts,
            },
            "evaluation": self.metrics.report(),
        }
