"""How the nodes log: one way for both. Code logs through `logging.getLogger(<package>)`; without
ROS 2 the records go to the console (`log_to_console`), in a ROS 2 node to the node's rclpy logger
(`routed_to_ros`: console output, /rosout and the ROS 2 log files as ROS 2 users expect)."""
import contextlib
import logging
from typing import Iterator, Sequence


def log_to_console(node_name: str) -> None:
    """Records at INFO and above on stderr as `[node_name] LEVEL message`."""
    logging.basicConfig(level=logging.INFO, format=f"[{node_name}] %(levelname)s %(message)s")


class RosLogHandler(logging.Handler):
    """Forwards records to an rclpy logger (`node.get_logger()`) at the matching severity.

    Each severity is called from a line of its own: rclpy's logger keeps one context per calling
    line and raises when the severity of a line changes between calls."""

    def __init__(self, ros_logger):
        super().__init__()
        self.ros_logger = ros_logger

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            if record.levelno >= logging.CRITICAL:
                self.ros_logger.fatal(message)
            elif record.levelno >= logging.ERROR:
                self.ros_logger.error(message)
            elif record.levelno >= logging.WARNING:
                self.ros_logger.warning(message)
            elif record.levelno >= logging.INFO:
                self.ros_logger.info(message)
            else:
                self.ros_logger.debug(message)
        except Exception:  # a failing log call must never take the node down (logging's own rule)
            self.handleError(record)


@contextlib.contextmanager
def routed_to_ros(logger_names: Sequence[str], ros_logger) -> Iterator[None]:
    """While inside: the records of `logger_names` go to `ros_logger` only (not also to the console)."""
    handler = RosLogHandler(ros_logger)
    loggers = [logging.getLogger(name) for name in logger_names]
    saved = [(lg.propagate, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
        lg.setLevel(logging.DEBUG)     # rclpy's logger level decides (--ros-args --log-level)
    try:
        yield
    finally:
        for lg, (propagate, level) in zip(loggers, saved):
            lg.removeHandler(handler)
            lg.propagate, lg.level = propagate, level
