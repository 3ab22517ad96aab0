"""The policy node as a ROS 2 executable: a thin rclpy shell around the same runtime.

Only this module imports rclpy. Parameters are declared from `PolicyNodeConfig` (so the launch
files' `parameters=[config/policy_node.yaml]` apply), command-line flags override them, and LowCmd /
LowState go through `bcg.transport.ros2` on this node (`/lowcmd`, `/lowstate`, unitree_hg types).
"""
import dataclasses
import threading

from bcg.transport import make_transport

from .config import NODE_NAME, ConfigError, PolicyNodeConfig, coerce
from .main import EXIT_REFUSED
from .setup_node import transport_config


def ros_main(cli_config: PolicyNodeConfig, argv) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from .run_node import log, run
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)   # our handlers send damping
    node = rclpy.create_node(NODE_NAME)
    try:
        defaults = PolicyNodeConfig()
        values = {}
        for f in dataclasses.fields(PolicyNodeConfig):
            declared = node.declare_parameter(f.name, getattr(defaults, f.name)).value
            cli = getattr(cli_config, f.name)
            values[f.name] = cli if cli != getattr(defaults, f.name) else declared
        try:
            config = PolicyNodeConfig(**coerce(values))
        except ConfigError as e:
            log.error("refusing to start: %s", e)
            return EXIT_REFUSED
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        config = dataclasses.replace(config, transport="ros2")
        try:
            return run(config, open_transport=lambda: make_transport(transport_config(config), ros_node=node))
        finally:
            executor.shutdown()
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
