"""The policy node as a ROS 2 node: the shared ROS 2 shell (`bcg.ros_node_shell`) around the same runtime.

Only here does the policy node reach rclpy (through the shell). `main.settings` has already resolved
the settings (parameter files, `--ros-args -p`, flags) and the endpoint (domain: `domain` >= 0, else
$ROS_DOMAIN_ID; Cyclone's configuration by the environment's rules) before rclpy starts; the node's
parameters are declared read-only at exactly those values. LowState comes through
`bcg.transport.ros2` on this node (`/lowstate`, unitree_hg types); LowCmd goes out from the writer
process, on a node of its own (`setup_node.WRITER_NODE_NAME`). SIGINT / SIGTERM stay the node's
own (rclpy's handlers are not installed): a stop sends damping first.
"""
import dataclasses

from bcg.ros_node_shell import RclpyApi, ros_node_session
from bcg.transport import make_transport
from bcg.transport.endpoint import Endpoint, NodeStart

from ..config import LOGGER_NAME, NODE_NAME, PolicyNodeConfig
from .run_node import run


def ros_main(config: PolicyNodeConfig, endpoint: Endpoint, start: NodeStart) -> int:
    endpoint.apply_environment()                  # read by rclpy here and by the writer process
    with ros_node_session(RclpyApi(), node_name=NODE_NAME, program=start.program, argv=start.argv,
                          domain_id=endpoint.domain_id, parameters=dataclasses.asdict(config),
                          logger_names=(LOGGER_NAME,)) as node:
        return run(config, endpoint, open_transport=lambda: make_transport(endpoint.transport, ros_node=node))
