"""Runs one bridge session over an open transport, shared by the CLI and the ROS 2 node."""
import sys
import threading
from typing import Optional

from bcg.robot import ModelNotFoundError, RobotDescription, RobotDescriptionError
from bcg.transport import Transport

from .bridge import SimBridge
from .config import BridgeConfig
from .display import Recorder, Viewer, display_available
from .metrics import write_json_atomic
from .lowstate_fill import SensorError
from bcg.motion import MotionFileError, load_motion

COMMAND_HISTORY = 64
"""LowCmd samples kept between two physics steps (the reader's depth): every command a 500 Hz
controller sends is seen and counted even when the loop stalls for 120 ms."""
SETUP_ERRORS = (ModelNotFoundError, RobotDescriptionError, MotionFileError, SensorError, ValueError)
"""What `build_bridge` raises for a bad model, motion file or setting (each message names it)."""


def build_bridge(config: BridgeConfig, transport: Transport, log=sys.stderr) -> SimBridge:
    """Load the robot (and motion), open the reader / writer, recorder and viewer.

    Raises one of SETUP_ERRORS before anything runs.
    """
    robot = RobotDescription.load(config.model or None)
    motion = load_motion(config.motion) if config.motion else None
    bridge = SimBridge(config, robot, transport.lowcmd_reader(check_crc=False, depth=COMMAND_HISTORY),
                       transport.lowstate_writer(), motion)
    if config.record:
        bridge.recorder = Recorder(bridge.core.model, config.record, config.record_fps,
                                   config.record_width, config.record_height, track_body=robot.root_body)
    if not config.headless and display_available():
        bridge.viewer = Viewer(bridge.core.model, bridge.core.data)
    print(f"sim_bridge: {robot.model_path} ({robot.num_joints} joints, mode_machine {robot.mode_machine}), "
          f"{transport.kind} domain {config.domain} on {config.interface}, physics {config.physics_hz:g} Hz, "
          f"state {config.state_hz:g} Hz, {'fast' if config.fast else 'real time'}", file=log, flush=True)
    return bridge


def run_bridge(bridge: SimBridge, stop: Optional[threading.Event] = None, log=sys.stderr) -> dict:
    """Simulate until the duration is over or `stop` is set; close observers and write the metrics
    (also when interrupted by an error). Returns the report (what the metrics file holds)."""
    config = bridge.config
    try:
        bridge.run(stop)
    finally:
        if bridge.viewer is not None:
            bridge.viewer.close()
        report = bridge.report()
        if config.metrics:
            write_json_atomic(config.metrics, report)
        rtf = report["real_time_factor"]
        print(f"sim_bridge: simulated {report['sim_time_s']:.3f} s in {report['wall_time_s']:.3f} s wall "
              f"(real-time factor {rtf if rtf is None else round(rtf, 2)}), "
              f"commands accepted {report['commands']['accepted']}, rejected {report['commands']['rejected']}",
              file=log, flush=True)
        if bridge.recorder is not None:
            print(f"sim_bridge: rendering the {bridge.recorder.pending} of {bridge.recorder.captured} frames "
                  "not drawn yet", file=log, flush=True)
            written = bridge.recorder.close()
            print(f"sim_bridge: recorded {bridge.recorder.frames} frames to {written}", file=log, flush=True)
    return report
