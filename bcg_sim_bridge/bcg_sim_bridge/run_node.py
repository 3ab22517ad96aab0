"""Runs the bridge over its transport until stopped (the direct-DDS and ROS 2 entry points: `main`,
`ros_node`). Importing it loads no MuJoCo: `main` settles MUJOCO_GL first, and `run` imports the
simulator (`runner`) only when it starts."""
import logging
import threading

from bcg.transport.endpoint import Endpoint

from .config import LOGGER_NAME, BridgeConfig

EXIT_BAD_CONFIG = 2
"""Exit code for a bad configuration: settings, model, motion or sensors."""
log = logging.getLogger(LOGGER_NAME)


def run(config: BridgeConfig, endpoint: Endpoint, stop: threading.Event, ros_node=None) -> int:
    """Open the transport (on `ros_node` in a ROS 2 node), build the bridge and run it until `stop`."""
    from bcg.transport import make_transport

    from .runner import SETUP_ERRORS, build_bridge, run_bridge  # imports mujoco
    for note in endpoint.notes:
        log.info("%s", note)
    with make_transport(endpoint.transport, ros_node=ros_node) as transport:
        try:
            bridge = build_bridge(config, transport)
        except SETUP_ERRORS as e:
            log.error("%s", e)
            return EXIT_BAD_CONFIG
        run_bridge(bridge, stop)
    return 0
