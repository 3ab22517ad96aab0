"""`bcg-sim-bridge` / ROS 2 `sim_bridge`: the MuJoCo G1 on rt/lowcmd and rt/lowstate.

Examples::

    bcg-sim-bridge --model scene_29dof.xml --domain 1 --interface lo
    bcg-sim-bridge --fast --duration 10 --wait-for-command 0 --metrics out/metrics.json --headless
    bcg-sim-bridge --params config/sim_bridge.yaml --elastic-band --record out/run.gif
    ros2 run bcg_sim_bridge sim_bridge --ros-args --params-file config/sim_bridge.yaml -p domain:=1

Settings in layers: `--params` file, the ROS 2 command line's `--params-file` / `-p`, then flags.
Started as `bcg-sim-bridge` it talks Cyclone DDS directly; as the ROS 2 executable `sim_bridge`
(ros2 run, ros2 launch) or with `--ros-args` it is a ROS 2 node (`ros_node`): the rule, and which
domain and interface follow from it, is `bcg.transport.endpoint`'s. Exit status 0 after
`--duration` or SIGINT / SIGTERM (metrics written either way), 2 for a bad configuration.
mujoco is imported only after MUJOCO_GL is settled (see `display.choose_offscreen_backend`).
"""
import argparse
import logging
import signal
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

from bcg.ros_params import without_ros_arguments
from bcg.transport.endpoint import Endpoint, NodeStart, begin_node, node_settings

from .config import LOGGER_NAME, NODE_NAME, ROS_EXECUTABLE, SIMULATOR_DOMAIN, BridgeConfig, load_config
from .run_node import EXIT_BAD_CONFIG, run

log = logging.getLogger(LOGGER_NAME)

_FLAGS = (
    # flag, config key, type, help
    ("--model", "model", str, "G1 MuJoCo XML (default $BCG_G1_MODEL)"),
    ("--transport", "transport", str, "'auto' (ROS 2 in a ROS 2 node, else DDS), 'dds' or 'ros2'"),
    ("--domain", "domain", int, "DDS domain id"),
    ("--interface", "interface", str, "network interface for DDS (lo: unicast 127.0.0.1)"),
    ("--emulate", "emulate", str, "'unitree_mujoco': behave like Unitree's MuJoCo simulator (crc 0, explicit PD)"),
    ("--physics-hz", "physics_hz", float, "MuJoCo step rate, Hz"),
    ("--state-hz", "state_hz", float, "LowState rate, Hz"),
    ("--duration", "duration", float, "simulated seconds to run, then exit 0 (0: forever)"),
    ("--wait-for-command", "wait_for_command", float,
     "hold the robot still at time 0 up to this many wall seconds until a valid LowCmd arrives (-1: no limit, "
     "the default; 0: simulate from the start)"),
    ("--command-timeout", "command_timeout", float, "seconds without an accepted LowCmd before damping"),
    ("--damping-kd", "damping_kd", float, "damping-mode kd, N m s/rad (negative: robot description's)"),
    ("--initial-pose", "initial_pose", str, "'default' or 'zero'"),
    ("--seed", "seed", int, "perturb the start (heading, joint noise) from this seed (-1: none)"),
    ("--band-mode", "band_mode", str, "'hold' (taut at the start, never lifts) or 'hang' (Unitree's: lifts)"),
    ("--band-stiffness", "band_stiffness", float, "elastic band spring constant, N/m"),
    ("--band-damping", "band_damping", float, "elastic band damping, N s/m"),
    ("--band-release-time", "band_release_time", float, "release the elastic band after this many seconds"),
    ("--metrics", "metrics", str, "write the metrics JSON here at exit"),
    ("--motion", "motion", str, "reference motion CSV (LAFAN1 layout, 30 fps) for tracking errors"),
    ("--motion-start", "motion_start", float, "simulated time (s) the reference motion starts at"),
    ("--motion-lead-in", "motion_lead_in", float, "seconds the policy's reference begins from rest (its contract's)"),
    ("--record", "record", str, "render offscreen to this .gif"),
    ("--record-fps", "record_fps", float, "frames per simulated second of the recording"),
    ("--record-width", "record_width", int, "recording width, pixels"),
    ("--record-height", "record_height", int, "recording height, pixels"),
)
_SWITCHES = (
    ("--fast", "fast", "run as fast as possible instead of real time"),
    ("--lockstep", "lockstep", "after the first LowCmd, step once the controller answered (policy node --lockstep)"),
    ("--elastic-band", "elastic_band", "hold the torso with the elastic band"),
    ("--headless", "headless", "never open the viewer"),
)


def parse_flags(argv: Optional[List[str]] = None) -> Tuple[Optional[str], Dict[str, Any]]:
    """(--params file or None, {config key: value} of the flags given) of a command line."""
    parser = argparse.ArgumentParser(prog="bcg-sim-bridge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", help="ROS 2 parameter YAML (ros__parameters), e.g. config/sim_bridge.yaml")
    for flag, key, kind, text in _FLAGS:
        parser.add_argument(flag, dest=key, type=kind, default=None, help=text)
    for flag, key, text in _SWITCHES:
        parser.add_argument(flag, dest=key, action="store_true", default=None, help=text)
    args = vars(parser.parse_args(argv))
    params = args.pop("params")
    return params, {k: v for k, v in args.items() if v is not None}


def parse_args(argv: Optional[List[str]] = None) -> BridgeConfig:
    """The config of the command line (file given by --params, then flags); raises ConfigError."""
    return load_config(*parse_flags(argv))


def settings(start: NodeStart) -> Tuple[BridgeConfig, Endpoint]:
    """What the bridge runs with, and where, for a process started as `start` (raises ConfigError,
    EndpointError or SystemExit for a bad command line)."""
    params_file, flags = parse_flags(without_ros_arguments(start.argv))
    return node_settings(BridgeConfig, start, node_name=NODE_NAME, ros_executable=ROS_EXECUTABLE,
                         fallback_domain=SIMULATOR_DOMAIN, params_file=params_file, flags=flags)


def install_stop_handlers(stop: threading.Event) -> None:
    """SIGINT / SIGTERM set `stop` (ROS 2 or not: rclpy's own handlers are not installed)."""
    def handler(signum, _frame):
        stop.set()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)


def main(argv: Optional[List[str]] = None) -> int:
    started = begin_node(NODE_NAME, settings, log, argv)
    if started is None:
        return EXIT_BAD_CONFIG
    start, config, endpoint = started
    from .display import prepare_rendering
    prepare_rendering(bool(config.record), config.headless)
    stop = threading.Event()
    install_stop_handlers(stop)
    if endpoint.ros:
        from .ros_node import ros_main
        return ros_main(config, endpoint, start, stop)
    return run(config, endpoint, stop)


if __name__ == "__main__":
    sys.exit(main())
