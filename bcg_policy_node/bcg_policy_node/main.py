"""`bcg-policy-node`: the policy node over Cyclone DDS directly (no ROS 2 needed).

    bcg-policy-node --policy FILE.onnx [--motion FILE] [--domain 1] [--interface lo] [--autostart]
                    [--params config/policy_node.yaml] [--model XML] [--events FILE.jsonl]

On a ROS 2 machine the same command (and the `policy_node` executable the launch files start)
runs the ROS 2 shell (`bcg_policy_node.ros_node`) when the transport resolves to 'ros2'.
The node is two processes: this one (LowState, safety checks, phases, policy) and the LowCmd
writer it starts (`command_writer`); see `runtime`.
Exit codes: 0 after a clean stop, 2 when it refuses to start (nothing published), 1 on a failure
while running.
"""
import argparse
import logging
import sys
from typing import List, Optional

from bcg.ros_params import without_ros_arguments
from bcg.transport import resolve_kind

from .config import ConfigError, load_config

EXIT_REFUSED = 2
"""Exit code when the node refuses to start (bad policy, motion, parameters, robot)."""

log = logging.getLogger("bcg_policy_node")


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
    p.add_argument("--params", help="ROS 2 parameter YAML (ros__parameters of `policy_node`)")
    p.add_argument("--model", help="G1 MuJoCo XML (default $BCG_G1_MODEL)")
    p.add_argument("--transport", choices=("auto", "ros2", "dds"))
    p.add_argument("--events", help="JSON-lines file of phase transitions and safety events")
    return p.parse_args(without_ros_arguments(argv))


def overrides(args) -> dict:
    return {k: v for k, v in vars(args).items() if k != "params" and v is not None}


def main(argv: Optional[List[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[policy_node] %(levelname)s %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    try:
        config = load_config(args.params, overrides(args))
    except ConfigError as e:
        log.error("refusing to start: %s", e)
        return EXIT_REFUSED
    if resolve_kind(config.transport) == "ros2":
        from .ros_node import ros_main
        return ros_main(config, argv)
    if without_ros_arguments(argv) != argv:
        log.warning("ROS 2 arguments ignored (direct DDS, no ROS 2): %s", " ".join(argv))
    from .run_node import run     # the heavy imports (onnxruntime, mujoco) only once the arguments are good
    return run(config)


if __name__ == "__main__":
    sys.exit(main())
