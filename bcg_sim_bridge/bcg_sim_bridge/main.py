"""`bcg-sim-bridge` / ROS 2 `sim_bridge`: the MuJoCo G1 on rt/lowcmd and rt/lowstate.

Examples::

    bcg-sim-bridge --model scene_29dof.xml --domain 1 --interface lo
    bcg-sim-bridge --fast --duration 10 --metrics out/metrics.json --headless
    bcg-sim-bridge --params config/sim_bridge.yaml --elastic-band --record out/run.gif
    ros2 run bcg_sim_bridge sim_bridge --ros-args --params-file config/sim_bridge.yaml

Flags override the `ros__parameters` of `--params`. Exit status 0 after `--duration` or
SIGINT / SIGTERM (metrics written either way), 2 for a bad configuration.
mujoco is imported only after MUJOCO_GL is settled (see `display.choose_offscreen_backend`).
"""
import argparse
import importlib.util
import os
import signal
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

from .config import BridgeConfig, ConfigError, load_config, transport_config

_FLAGS = (
    # flag, config key, type, help
    ("--model", "model", str, "G1 MuJoCo XML (default $BCG_G1_MODEL)"),
    ("--transport", "transport", str, "'dds' (direct Cyclone DDS) or 'ros2'"),
    ("--domain", "domain", int, "DDS domain id"),
    ("--interface", "interface", str, "network interface for DDS (lo: unicast 127.0.0.1)"),
    ("--physics-hz", "physics_hz", float, "MuJoCo step rate, Hz"),
    ("--state-hz", "state_hz", float, "LowState rate, Hz"),
    ("--duration", "duration", float, "simulated seconds to run, then exit 0 (0: forever)"),
    ("--wait-for-command", "wait_for_command", float, "hold time at 0 up to this many wall seconds until a LowCmd arrives"),
    ("--command-timeout", "command_timeout", float, "seconds without an accepted LowCmd before damping"),
    ("--damping-kd", "damping_kd", float, "damping-mode kd, N m s/rad (negative: robot description's)"),
    ("--initial-pose", "initial_pose", str, "'default' or 'zero'"),
    ("--band-mode", "band_mode", str, "'hold' (taut at the start, never lifts) or 'hang' (Unitree's: lifts)"),
    ("--band-stiffness", "band_stiffness", float, "elastic band spring constant, N/m"),
    ("--band-damping", "band_damping", float, "elastic band damping, N s/m"),
    ("--band-release-time", "band_release_time", float, "release the elastic band after this many seconds"),
    ("--metrics", "metrics", str, "write the metrics JSON here at exit"),
    ("--motion", "motion", str, "reference motion CSV (LAFAN1 layout, 30 fps) for tracking errors"),
    ("--motion-start", "motion_start", float, "simulated time (s) the reference motion starts at"),
    ("--record", "record", str, "render offscreen to this .gif"),
)
_SWITCHES = (
    ("--fast", "fast", "run as fast as possible instead of real time"),
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


def _install_stop_handlers(stop: threading.Event) -> None:
    def handler(signum, _frame):
        stop.set()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)


def _ros_requested(argv: List[str]) -> bool:
    """ROS 2 mode: `--ros-args` given, or started as the `sim_bridge` executable where rclpy exists."""
    if "--ros-args" in argv:
        return True
    return os.path.basename(sys.argv[0]) == "sim_bridge" and importlib.util.find_spec("rclpy") is not None


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if _ros_requested(argv):
        from .ros_node import main as ros_main
        return ros_main(argv)
    try:
        config = parse_args(argv)
    except ConfigError as e:
        print(f"bcg-sim-bridge: error: {e}", file=sys.stderr)
        return 2
    from .display import prepare_rendering
    prepare_rendering(bool(config.record), config.headless)
    stop = threading.Event()
    _install_stop_handlers(stop)
    from bcg.transport import make_transport

    from .runner import SETUP_ERRORS, build_bridge, run_bridge
    with make_transport(transport_config(config)) as transport:
        try:
            bridge = build_bridge(config, transport)
        except SETUP_ERRORS as e:
            print(f"bcg-sim-bridge: error: {e}", file=sys.stderr)
            return 2
        run_bridge(bridge, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
