"""The bridge as a ROS 2 node (`ros2 run bcg_sim_bridge sim_bridge --ros-args ...`). Needs rclpy.

Parameters are declared from `BridgeConfig` (same names, defaults and types; `transport` defaults
to 'ros2' here); the command line's flags (everything outside --ros-args, as `bcg-sim-bridge`
takes them, which is how the launch graph passes its settings) override them. The ROS 2 context
is opened on the `domain` of the command line (or of its --params file): a `domain` ROS parameter
that disagrees is refused rather than silently ignored. The node is spun in a background thread
while the bridge loop runs in the main thread; shutting ROS down (Ctrl-C) stops the loop, and the
metrics are still written.
"""
import dataclasses
import sys
import threading
from typing import Any, Dict, List, Optional

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from bcg.ros_params import without_ros_arguments

from .config import NODE_NAME, BridgeConfig, ConfigError, load_config, transport_config
from .display import prepare_rendering
from .main import parse_flags

NODE_DEFAULTS = {"transport": "ros2"}
"""Defaults that differ from BridgeConfig's when running as a ROS 2 node."""


class SimBridgeNode(Node):
    """Holds the parameters; the ROS 2 transport attaches its publisher / subscription to it."""

    def __init__(self, flags: Dict[str, Any], domain: int):
        super().__init__(NODE_NAME)
        for f in dataclasses.fields(BridgeConfig):
            self.declare_parameter(f.name, NODE_DEFAULTS.get(f.name, f.default),
                                   ParameterDescriptor(dynamic_typing=True))   # types: checked by load_config
        values = {f.name: self.get_parameter(f.name).value for f in dataclasses.fields(BridgeConfig)}
        self.config = load_config(overrides={**values, **flags})
        if self.config.domain != domain:
            raise ConfigError(f"{NODE_NAME} parameter `domain` = {self.config.domain} differs from the domain "
                              f"{domain} the node was started on (command line / --params); give it there")


def main(argv: Optional[List[str]] = None) -> int:
    from bcg.transport import make_transport
    argv = sys.argv[1:] if argv is None else argv
    from bcg.transport.ros2 import apply_cyclone_config
    try:
        params_file, flags = parse_flags(without_ros_arguments(argv))
        cli = load_config(params_file, flags)
    except ConfigError as e:
        print(f"sim_bridge: error: {e}", file=sys.stderr)
        return 2
    domain = cli.domain
    apply_cyclone_config(transport_config(cli, NODE_NAME))
    rclpy.init(args=argv, domain_id=domain)
    stop = threading.Event()
    try:
        node = SimBridgeNode(flags, domain)
    except ConfigError as e:
        print(f"sim_bridge: error: {e}", file=sys.stderr)
        rclpy.shutdown()
        return 2
    config = node.config
    prepare_rendering(bool(config.record), config.headless)
    from .runner import SETUP_ERRORS, build_bridge, run_bridge   # imports mujoco
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin():
        try:
            executor.spin()
        except Exception:  # rclpy raises on shutdown from a signal (ExternalShutdownException)
            pass
        finally:
            stop.set()
    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    ros_node = node if config.transport == "ros2" else None
    try:
        with make_transport(transport_config(config, NODE_NAME), ros_node=ros_node) as transport:
            try:
                bridge = build_bridge(config, transport)
            except SETUP_ERRORS as e:
                node.get_logger().error(str(e))
                return 2
            run_bridge(bridge, stop)
    finally:
        executor.shutdown()
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0
