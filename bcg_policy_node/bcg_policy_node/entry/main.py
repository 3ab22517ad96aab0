"""`bcg-policy-node` / ROS 2 `policy_node`: the policy node.

    bcg-policy-node --policy FILE.onnx [--motion FILE] [--domain 1] [--interface lo] [--autostart] [--lockstep]
                    [--params config/policy_node.yaml] [--model XML] [--events FILE.jsonl] [--no-state-crc]
    ros2 run bcg_policy_node policy_node --ros-args -p domain:=1 -p interface:=lo

Started as `bcg-policy-node` (or by `bcg launch`) it talks Cyclone DDS directly; started as the ROS 2
executable `policy_node` (ros2 run, ros2 launch) or with `--ros-args`, it is a ROS 2 node
(`ros_node`): the rule, and which domain and interface follow from it, is `bcg.transport.endpoint`'s.
The node is two processes: this one (LowState, safety checks, phases, policy) and the LowCmd writer
it starts (`realtime.command_writer`); see `realtime.runtime`.
Exit codes: 0 after a clean stop, 2 when it refuses to start (nothing published), 1 on a failure
while running.
"""
import argparse
import logging
import os
import sys
from typing import List, Optional, Tuple

from bcg.ros_params import without_ros_arguments
from bcg.transport.endpoint import Endpoint, NodeStart, begin_node, node_settings

from ..config import LOGGER_NAME, NODE_NAME, ROBOT_DOMAIN, ROS_EXECUTABLE, PolicyNodeConfig
from .exit_codes import EXIT_REFUSED

log = logging.getLogger(LOGGER_NAME)
NO_RENDERING = ("MUJOCO_GL", "disable")
"""Set (unless set already) before the node imports MuJoCo for the robot description: the node renders
nothing, and MuJoCo then loads no OpenGL library (GLFW's takes about 0.05 s of CPU at start)."""


def parse_args(argv: List[str]):
    """The node's own flags; a ROS 2 section (`--ros-args ...`, as launch_ros adds) is left to rclpy and
    anything else unknown is an error (exit 2), on both paths: a mistyped flag never goes unnoticed."""
    p = argparse.ArgumentParser(prog="bcg-policy-node", description=__doc__.split("\n")[0])
    p.add_argument("--policy", help="ONNX policy file (default: the built-in zero-action stand policy)")
    p.add_argument("--motion", help="reference motion (.csv / .npz)")
    p.add_argument("--domain", type=int, help="DDS domain id (robot 0, simulation 1)")
    p.add_argument("--interface", help="network interface ('lo' for a simulator on this machine)")
    p.add_argument("--autostart", action="store_true", default=None,
                   help="leave zero torque and start the policy without the remote (simulation)")
    p.add_argument("--lockstep", action="store_true", default=None,
                   help="simulated time from the LowState ticks, one LowCmd per LowState (bcg-sim-bridge --lockstep)")
    p.add_argument("--no-state-crc", dest="check_state_crc", action="store_false", default=None,
                   help="accept LowState whatever its CRC (Unitree's MuJoCo simulator sends crc 0)")
    p.add_argument("--params", help="ROS 2 parameter YAML (ros__parameters of `policy_node`)")
    p.add_argument("--model", help="G1 MuJoCo XML (default $BCG_G1_MODEL)")
    p.add_argument("--transport", choices=("auto", "ros2", "dds"))
    p.add_argument("--events", help="JSON-lines file of phase transitions and safety events")
    return p.parse_args(without_ros_arguments(argv))


def settings(start: NodeStart) -> Tuple[PolicyNodeConfig, Endpoint]:
    """What the node runs with, and where, for a process started as `start` (raises ConfigError,
    EndpointError or SystemExit for a bad command line)."""
    args = parse_args(list(start.argv))
    flags = {k: v for k, v in vars(args).items() if k != "params" and v is not None}
    return node_settings(PolicyNodeConfig, start, node_name=NODE_NAME, ros_executable=ROS_EXECUTABLE,
                         fallback_domain=ROBOT_DOMAIN, params_file=args.params, flags=flags)


def main(argv: Optional[List[str]] = None) -> int:
    started = begin_node(NODE_NAME, settings, log, argv)
    if started is None:
        return EXIT_REFUSED
    start, config, endpoint = started
    os.environ.setdefault(*NO_RENDERING)
    if endpoint.ros:
        from .ros_node import ros_main
        return ros_main(config, endpoint, start)
    from .run_node import run  # the heavy imports (onnxruntime, mujoco) only once the arguments are good
    return run(config, endpoint)


if __name__ == "__main__":
    sys.exit(main())
