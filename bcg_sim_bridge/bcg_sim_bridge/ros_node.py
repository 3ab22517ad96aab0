"""The bridge as a ROS 2 node (`ros2 run bcg_sim_bridge sim_bridge --ros-args ...`). Needs rclpy.

Parameters are declared from `BridgeConfig` (same names, defaults and types; `transport` defaults
to 'ros2' here). The node is spun in a background thread while the bridge loop runs in the main
thread; shutting ROS down (Ctrl-C) stops the loop, and the metrics are still written.
"""
import dataclasses
import sys
import threading
from typing import List, Optional

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from .config import NODE_NAME, BridgeConfig, ConfigError, load_config

NODE_DEFAULTS = {"transport": "ros2"}
"""Defaults that differ from BridgeConfig's when running as a ROS 2 node."""


class SimBridgeNode(Node):
    """Holds the parameters; the ROS 2 transport attaches its publisher / subscription to it."""

    def __init__(self):
        super().__init__(NODE_NAME)
        for f in dataclasses.fields(BridgeConfig):
            self.declare_parameter(f.name, NODE_DEFAULTS.get(f.name, f.default))
        values = {f.name: self.get_parameter(f.name).value for f in dataclasses.fields(BridgeConfig)}
        self.config = load_config(overrides=values)


def main(argv: Optional[List[str]] = None) -> int:
    from bcg.transport import make_transport

    from .runner import SETUP_ERRORS, build_bridge, run_bridge, transport_config
    rclpy.init(args=argv if argv is not None else sys.argv)
    stop = threading.Event()
    try:
        node = SimBridgeNode()
    except ConfigError as e:
        print(f"sim_bridge: error: {e}", file=sys.stderr)
        rclpy.shutdown()
        return 2
    config = node.config
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
