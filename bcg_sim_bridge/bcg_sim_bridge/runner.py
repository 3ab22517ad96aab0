"""Runs one bridge session over an open transport, shared by the CLI and the ROS 2 node."""
import logging
import threading
from typing import Optional

from bcg.motion import MotionFileError, ReferenceMotion, load_motion
from bcg.motion.lead_in import LeadIn
from bcg.motion.resample import at_control_rate
from bcg.robot import ModelNotFoundError, RobotDescription, RobotDescriptionError
from bcg.transport import Transport

from .bridge import SimBridge
from .config import LOGGER_NAME, BridgeConfig
from .display import Recorder, Viewer, display_available
from .lowstate_fill import SensorError
from .metrics import write_json_atomic

COMMAND_HISTORY = 64
"""LowCmd samples kept between two physics steps (the reader's depth): every command a 500 Hz
controller sends is seen and counted even when the loop stalls for 120 ms."""
SETUP_ERRORS = (ModelNotFoundError, RobotDescriptionError, MotionFileError, SensorError, ValueError)
"""What `build_bridge` raises for a bad model, motion file or setting (each message names it)."""
log = logging.getLogger(LOGGER_NAME)


def build_bridge(config: BridgeConfig, transport: Transport) -> SimBridge:
    """Load the robot (and motion), open the reader / writer, recorder and viewer.

    Raises one of SETUP_ERRORS before anything runs.
    """
    robot = RobotDescription.load(config.model or None)
    motion = tracked_motion(config, robot) if config.motion else None
    bridge = SimBridge(config, robot, transport.lowcmd_reader(check_crc=False, depth=COMMAND_HISTORY),
                       transport.lowstate_writer(crc=not config.emulate), motion)
    if config.record:
        bridge.recorder = Recorder(bridge.core.model, config.record, config.record_fps,
                                   config.record_width, config.record_height, track_body=robot.root_body)
    if not config.headless and display_available():
        bridge.viewer = Viewer(bridge.core.model, bridge.core.data)
    log.info("%s (%d joints, mode_machine %d), %s domain %d on %s, physics %g Hz, state %g Hz, %s%s",
             robot.model_path, robot.num_joints, robot.mode_machine, transport.kind, config.domain,
             config.interface or "Cyclone's interface", config.physics_hz, config.state_hz,
             "lockstep with its controller" if config.lockstep else "fast" if config.fast else "real time",
             f", emulating {config.emulate} (crc 0, mode_machine 0, explicit PD from one-step-old sensors)"
             if config.emulate else "")
    return bridge


def tracked_motion(config: BridgeConfig, robot: RobotDescription) -> ReferenceMotion:
    """The motion joint tracking is measured against: `config.motion` at its own frame rate, blended
    in from rest over `config.motion_lead_in` as the policy node's reference is (the robot's joints,
    its default pose and standing height)."""
    motion = load_motion(config.motion)
    if not config.motion_lead_in:
        return motion
    return at_control_rate(motion, motion.fps, robot.joint_names,
                           lead_in=LeadIn(config.motion_lead_in, robot.default_q, robot.standing_height))


def run_bridge(bridge: SimBridge, stop: Optional[threading.Event] = None) -> dict:
    """Simulate until the duration is over or `stop` is set; close observers and write the metrics
    (also when interrupted by an error). Returns the report (what the metrics file holds)."""
    config = bridge.config
    try:
        bridge.run(stop)
    finally:
        if bridge.viewer is not None:
            bridge.viewer.close()
        bridge.report_rejections()
        report = bridge.report()
        if config.metrics:
            write_json_atomic(config.metrics, report)
        rtf = report["real_time_factor"]
        log.info("simulated %.3f s in %.3f s wall (real-time factor %s), commands accepted %d, rejected %s",
                 report["sim_time_s"], report["wall_time_s"], rtf if rtf is None else round(rtf, 2),
                 report["commands"]["accepted"], bridge.rejections)
        if bridge.recorder is not None:
            log.info("rendering the %d of %d frames not drawn yet", bridge.recorder.pending, bridge.recorder.captured)
            written = bridge.recorder.close()
            log.info("recorded %d frames to %s", bridge.recorder.frames, written)
    return report
