"""The ROS 2 side of a node, written once: both nodes and the ROS 2 transport's own node use it.

`ros_node_session` opens an rclpy context on the DDS domain the node resolved (without rclpy's
signal handlers: the nodes handle SIGINT / SIGTERM themselves, the policy node by damping first),
creates the node with every setting declared as a read-only parameter at the value the node
actually runs with (so `ros2 param get` tells the truth and `ros2 param set` is refused: "Trying
to set a read-only parameter", the description saying why), routes the node's `logging` records to
its rclpy logger (`bcg.node_log`), and spins it in a thread of its own (`Spinner`). On the way out
it shuts the executor down and joins the spin thread before it destroys the node and the context:
a spin thread left inside rclpy's wait is killed at interpreter exit and aborts the process
("terminate called without an active exception", exit code -6).

rclpy is reached only through `RclpyApi` (imported when a session starts), so that all of this
runs, and is tested, where ROS 2 is absent, with a stand-in for that API.
"""
import contextlib
import logging
import threading
from typing import Any, Iterator, Mapping, Optional, Sequence

from bcg.node_log import routed_to_ros

SPIN_JOIN_TIMEOUT_S = 5.0
"""s to wait for the spin thread to leave rclpy's wait after the executor's shutdown."""
READ_ONLY_REASON = ("fixed when the node starts: it runs with this value; to change it, restart the node "
                    "with `--ros-args -p {name}:=VALUE` (or the parameter file)")
"""Description of every parameter (`ros2 param describe`); rclpy refuses `ros2 param set` on read-only ones."""

log = logging.getLogger("bcg")


class RclpyApi:
    """The rclpy calls a session makes (the only place they are made)."""

    def __init__(self):
        import rclpy
        from rcl_interfaces.msg import ParameterDescriptor
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter
        from rclpy.signals import SignalHandlerOptions
        self._rclpy, self._descriptor, self._context = rclpy, ParameterDescriptor, Context
        self._executor, self._parameter, self._signals = SingleThreadedExecutor, Parameter, SignalHandlerOptions

    def open_context(self, args: Sequence[str], domain_id: int):
        """A context of its own on `domain_id`; `args` is a whole command line (program name first)."""
        context = self._context()
        self._rclpy.init(args=list(args), context=context, domain_id=int(domain_id),
                         signal_handler_options=self._signals.NO)
        return context

    def create_node(self, name: str, context, overrides: Mapping[str, Any]):
        """The node; `overrides` are the initial values of its parameters (over the command line's)."""
        return self._rclpy.create_node(name, context=context, parameter_overrides=[
            self._parameter(key, value=value) for key, value in overrides.items()])

    def declare_read_only(self, node, name: str, value: Any, description: str) -> None:
        node.declare_parameter(name, value, self._descriptor(read_only=True, description=description))

    def executor(self, context):
        return self._executor(context=context)

    def close_context(self, context) -> None:
        self._rclpy.try_shutdown(context=context)


class Spinner:
    """Runs `executor.spin()` in a thread of its own until `stop()`, which shuts the executor down and
    joins the thread (a thread that outlives rclpy aborts the process at exit)."""

    def __init__(self, executor, name: str = "ros2-spin"):
        self.executor = executor
        self._thread = threading.Thread(target=self._spin, name=name, daemon=True)
        self.error: Optional[BaseException] = None

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except BaseException as e:      # rclpy raises once its context is shut down from elsewhere
            self.error = e

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = SPIN_JOIN_TIMEOUT_S) -> bool:
        """Shut the executor down and join the spin thread; True when it ended within `timeout_s`."""
        self.executor.shutdown()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("ROS 2 spin thread still running %g s after the executor's shutdown", timeout_s)
            return False
        return True


@contextlib.contextmanager
def ros_node_session(api, *, node_name: str, program: str, argv: Sequence[str], domain_id: int,
                     parameters: Optional[Mapping[str, Any]] = None,
                     logger_names: Sequence[str] = ()) -> Iterator[Any]:
    """An rclpy node (yielded) named `node_name` on DDS domain `domain_id`, spun in its own thread.

    `program` / `argv`: the command line (rcl reads its `--ros-args`: remappings, log level);
    `parameters`: every setting the node runs with, declared read-only at those values;
    `logger_names`: std loggers whose records go to the node's rclpy logger meanwhile.
    Teardown (also on an exception): executor shut down, spin thread joined, node destroyed,
    context shut down, in that order."""
    parameters = dict(parameters or {})
    context = api.open_context([program, *argv], domain_id)
    try:
        node = api.create_node(node_name, context, parameters)
        try:
            for key, value in parameters.items():
                api.declare_read_only(node, key, value, READ_ONLY_REASON.format(name=key))
            spinner = Spinner(api.executor(context), name=f"{node_name}-spin")
            spinner.executor.add_node(node)
            with routed_to_ros(logger_names, node.get_logger()):
                spinner.start()
                try:
                    yield node
                finally:
                    spinner.stop()
        finally:
            node.destroy_node()
    finally:
        api.close_context(context)
