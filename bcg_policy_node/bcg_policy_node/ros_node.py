"""The policy node as a ROS 2 executable: a thin rclpy shell around the same runtime.

Only this module imports rclpy. Parameters are declared from `PolicyNodeConfig` (so the launch
files' `parameters=[config/policy_node.yaml]` apply), command-line flags override them, and LowState
comes through `bcg.transport.ros2` on this node (`/lowstate`, unitree_hg types); LowCmd goes out from
the writer process, on a node of its own (`WRITER_NODE_NAME`). The ROS 2 context is opened on the
`domain` of the command line (or of its --params file), not ROS_DOMAIN_ID, and Cyclone on its
`interface`: a `domain` or `interface` ROS parameter that disagrees is refused rather than silently
ignored (a simulation must never reach the robot's domain). Parameters are declared with dynamic
typing, so that YAML's `2` for a float parameter is checked and converted by `coerce`, as the
direct-DDS entry point does, instead of failing inside rclpy.
"""
import dataclasses
import threading

from bcg.transport import make_transport

from .config import NODE_NAME, ConfigError, PolicyNodeConfig, coerce
from .main import EXIT_REFUSED
from .setup_node import transport_config


def ros_main(cli_config: PolicyNodeConfig, argv) -> int:
    import rclpy
    from rcl_interfaces.msg import ParameterDescriptor
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from bcg.transport.ros2 import apply_cyclone_config

    from .run_node import log, run
    apply_cyclone_config(transport_config(cli_config))
    rclpy.init(args=argv, domain_id=cli_config.domain,
               signal_handler_options=SignalHandlerOptions.NO)   # our handlers send damping
    node = rclpy.create_node(NODE_NAME)
    try:
        defaults = PolicyNodeConfig()
        values = {}
        for f in dataclasses.fields(PolicyNodeConfig):
            declared = node.declare_parameter(f.name, getattr(defaults, f.name),
                                              ParameterDescriptor(dynamic_typing=True)).value
            cli = getattr(cli_config, f.name)
            values[f.name] = cli if cli != getattr(defaults, f.name) else declared
        try:
            config = PolicyNodeConfig(**coerce(values))
            for key in ("domain", "interface"):
                if getattr(config, key) != getattr(cli_config, key):
                    raise ConfigError(f"{NODE_NAME} parameter `{key}` = {getattr(config, key)!r} differs from the "
                                      f"{key} {getattr(cli_config, key)!r} the node was started on (command line / "
                                      "--params); give it there")
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
