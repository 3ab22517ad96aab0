"""The bridge as a ROS 2 node: the shared ROS 2 shell (`bcg.ros_node_shell`) around the same run.

Only here does the bridge reach rclpy (through the shell). `main.settings` has already resolved the
settings (parameter files, `--ros-args -p`, flags) and the endpoint (transport ros2 on this node;
domain: `domain` >= 0, else $ROS_DOMAIN_ID; Cyclone's configuration by the environment's rules)
before rclpy starts; the node's parameters are declared read-only at exactly those values. The
bridge loop runs in the main thread while the shell spins the node; SIGINT / SIGTERM stop the loop
(`main.install_stop_handlers`), and the metrics are still written.
"""
import dataclasses
import threading

from bcg.ros_node_shell import RclpyApi, ros_node_session
from bcg.transport.endpoint import Endpoint, NodeStart

from .config import LOGGER_NAME, NODE_NAME, BridgeConfig
from .run_node import run


def ros_main(config: BridgeConfig, endpoint: Endpoint, start: NodeStart, stop: threading.Event) -> int:
    endpoint.apply_environment()
    with ros_node_session(RclpyApi(), node_name=NODE_NAME, program=start.program, argv=start.argv,
                          domain_id=endpoint.domain_id, parameters=dataclasses.asdict(config),
                          logger_names=(LOGGER_NAME,)) as node:
        return run(config, endpoint, stop, ros_node=node)
