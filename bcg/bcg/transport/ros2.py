"""ROS 2 transport: rclpy with unitree_ros2's ``unitree_hg/msg/LowCmd`` / ``LowState``.

Topics ``/lowcmd`` and ``/lowstate`` (ROS 2 puts them on DDS as ``rt/lowcmd`` / ``rt/lowstate``,
the robot's own topics). rclpy and unitree_hg are imported only when this transport is opened,
so the rest of the suite runs where ROS 2 is absent. QoS as the direct transport: publishers
reliable keep-last 1 (match every subscriber), subscriptions best effort keep-last 1 (match
every publisher, the robot's included).

Domain and interface: with a node of its own, the transport initialises a private rclpy context
on ``config.domain_id`` (without signal handlers: signals belong to the caller); if
``config.interface`` is set and ``CYCLONEDDS_URI`` is not, it writes a Cyclone configuration for it
and points ``CYCLONEDDS_URI`` at it first (`apply_cyclone_config`; read by rmw_cyclonedds_cpp,
which unitree_ros2 requires). With a node passed in, all of that is the caller's (the node shells
call `apply_cyclone_config` before their own rclpy.init), and so is spinning that node.
"""
import os
import tempfile
import threading

from bcg.transport import Transport, TransportConfig, Writer
from bcg.transport.cyclone_config import write_cyclone_config
from bcg.transport.latest import LatestSampleReader
from bcg.transport.ros2_convert import message_to_record, record_to_message
from bcg.wire import LOWCMD, LOWSTATE, MessageCodec

LOWCMD_ROS_TOPIC = "/lowcmd"
LOWSTATE_ROS_TOPIC = "/lowstate"


def apply_cyclone_config(config: TransportConfig) -> None:
    """Point CYCLONEDDS_URI (read by rmw_cyclonedds_cpp at rclpy.init) at a configuration for
    `config.interface` / peers, unless the interface is unset or CYCLONEDDS_URI already is. Call it
    before rclpy.init; child processes inherit it."""
    if config.interface is None or "CYCLONEDDS_URI" in os.environ:
        return
    path = os.path.join(tempfile.gettempdir(), f"bcg-cyclonedds-{os.getpid()}.xml")
    os.environ["CYCLONEDDS_URI"] = write_cyclone_config(config, path)


def _qos(reliable: bool, depth: int = 1):
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(
        depth=depth, history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.VOLATILE,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT)


class Ros2Writer(Writer):
    """Publishes records as unitree_hg messages (one message object, reused)."""

    def __init__(self, node, msg_type, topic: str, codec: MessageCodec):
        self.codec = codec
        self._msg = msg_type()
        self._lock = threading.Lock()
        self.endpoint = node.create_publisher(msg_type, topic, _qos(reliable=True))

    def write(self, rec) -> None:
        rec["crc"] = self.codec.crc(rec)
        with self._lock:
            record_to_message(rec, self.codec, self._msg)
            self.endpoint.publish(self._msg)


class Ros2Reader(LatestSampleReader):
    """Subscription whose callback (run by whoever spins the node) offers converted records."""

    def __init__(self, node, msg_type, topic: str, codec: MessageCodec, check_crc: bool, depth: int = 1):
        super().__init__(codec, check_crc, depth)
        self.endpoint = node.create_subscription(
            msg_type, topic, self._on_message, _qos(reliable=False, depth=depth))

    def _on_message(self, msg) -> None:
        self.offer(message_to_record(msg, self.codec))


class Ros2Transport(Transport):
    """rclpy publishers / subscriptions on a node (its own, spun in a thread, or the caller's)."""

    kind = "ros2"

    def __init__(self, config: TransportConfig, node=None):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
        from unitree_hg.msg import LowCmd, LowState
        self._types = {"cmd": LowCmd, "state": LowState}
        self.config = config
        self._context = self._executor = self._thread = None
        if node is None:
            apply_cyclone_config(config)
            self._context = Context()
            # args=[]: the process's command line belongs to its main node (a launch file's
            # `-r __node:=...` would otherwise give this node the same name); signals to the caller
            rclpy.init(args=[], context=self._context, domain_id=int(config.domain_id),
                       signal_handler_options=SignalHandlerOptions.NO)
            node = rclpy.create_node(config.node_name, context=self._context)
            self._executor = SingleThreadedExecutor(context=self._context)
            self._executor.add_node(node)
            self._thread = threading.Thread(target=self._executor.spin, name="bcg-ros2-spin",
                                            daemon=True)
            self._thread.start()
        self._node = node
        self._endpoints = []
        """Publishers and subscriptions made here, destroyed on close."""

    def _made(self, endpoint):
        destroy = (self._node.destroy_publisher if isinstance(endpoint, Writer)
                   else self._node.destroy_subscription)
        self._endpoints.append((destroy, endpoint.endpoint))
        return endpoint

    def lowcmd_writer(self) -> Ros2Writer:
        return self._made(Ros2Writer(self._node, self._types["cmd"], LOWCMD_ROS_TOPIC, LOWCMD))

    def lowstate_writer(self) -> Ros2Writer:
        return self._made(Ros2Writer(self._node, self._types["state"], LOWSTATE_ROS_TOPIC,
                                     LOWSTATE))

    def lowcmd_reader(self, check_crc: bool = True, depth: int = 1) -> Ros2Reader:
        return self._made(Ros2Reader(self._node, self._types["cmd"], LOWCMD_ROS_TOPIC, LOWCMD,
                                     check_crc, depth))

    def lowstate_reader(self, check_crc: bool = True) -> Ros2Reader:
        return self._made(Ros2Reader(self._node, self._types["state"], LOWSTATE_ROS_TOPIC,
                                     LOWSTATE, check_crc))

    def close(self) -> None:
        """Destroy what this transport made: its endpoints, and its node and context if any."""
        for destroy, endpoint in self._endpoints:
            destroy(endpoint)
        self._endpoints.clear()
        if self._context is None:
            return
        import rclpy
        self._executor.shutdown()
        self._node.destroy_node()
        rclpy.shutdown(context=self._context)
        self._thread.join(timeout=2.0)
        self._context = None
