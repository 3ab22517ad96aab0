"""ROS 2 transport: rclpy with unitree_ros2's ``unitree_hg/msg/LowCmd`` / ``LowState``.

Topics ``/lowcmd`` and ``/lowstate`` (ROS 2 puts them on DDS as ``rt/lowcmd`` / ``rt/lowstate``,
the robot's own topics). rclpy and unitree_hg are imported only when this transport is opened,
so the rest of the suite runs where ROS 2 is absent. QoS as the direct transport: publishers
reliable keep-last 1 (match every subscriber), subscriptions best effort keep-last 1 (match
every publisher, the robot's included).

With a node passed in, the node's process (its `bcg.ros_node_shell` session) owns the context,
the domain, the Cyclone configuration and the spinning. Without one (the policy node's LowCmd
writer process), the transport opens a session of its own on ``config.domain_id`` (the process's
command line belongs to its main node, so none is given to rcl), after setting Cyclone's
configuration by the rule every ROS 2 node follows (`bcg.transport.endpoint.ros2_cyclone_uri`).
"""
import contextlib
import os
import threading
from typing import Any, List

from bcg.ros_node_shell import RclpyApi, ros_node_session
from bcg.transport import Transport, TransportConfig, Writer
from bcg.transport.endpoint import ros2_cyclone_uri
from bcg.transport.latest import LatestSampleReader
from bcg.transport.ros2_convert import MessageFiller, message_to_record
from bcg.wire import LOWCMD, LOWSTATE, MessageCodec

LOWCMD_ROS_TOPIC = "/lowcmd"
LOWSTATE_ROS_TOPIC = "/lowstate"
SESSION_PROGRAM = "bcg_ros2_transport"
"""Program name of the transport's own session (rcl skips argv[0]; no other argument is given)."""


def _qos(reliable: bool, depth: int = 1):
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(
        depth=depth, history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.VOLATILE,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT)


class Ros2Writer(Writer):
    """Publishes records as unitree_hg messages (one preallocated message, refilled); `crc` False: crc = 0."""

    def __init__(self, node, msg_type, topic: str, codec: MessageCodec, crc: bool = True):
        self.codec, self.crc = codec, crc
        self._filler = MessageFiller(msg_type(), codec)
        self._lock = threading.Lock()
        self.endpoint = node.create_publisher(msg_type, topic, _qos(reliable=True))

    def write(self, rec) -> None:
        rec["crc"] = self.codec.crc(rec) if self.crc else 0
        with self._lock:
            self.endpoint.publish(self._filler.fill(rec))


class Ros2Reader(LatestSampleReader):
    """Subscription whose callback (run by whoever spins the node) offers converted records."""

    def __init__(self, node, msg_type, topic: str, codec: MessageCodec, check_crc: bool, depth: int = 1):
        super().__init__(codec, check_crc, depth)
        self.endpoint = node.create_subscription(
            msg_type, topic, self._on_message, _qos(reliable=False, depth=depth))

    def _on_message(self, msg) -> None:
        try:
            rec = message_to_record(msg, self.codec)
        except ValueError:           # an array of the wrong length
            self.drop("malformed")
            return
        self.offer(rec)


class Ros2Transport(Transport):
    """rclpy publishers / subscriptions on a node (its own, spun in a thread, or the caller's)."""

    kind = "ros2"

    def __init__(self, config: TransportConfig, node=None):
        from unitree_hg.msg import LowCmd, LowState
        self._types = {"cmd": LowCmd, "state": LowState}
        self.config = config
        self._session = contextlib.ExitStack()
        if node is None:
            uri, _ = ros2_cyclone_uri(config, os.environ)
            if uri is not None:
                os.environ["CYCLONEDDS_URI"] = uri
            node = self._session.enter_context(ros_node_session(
                RclpyApi(), node_name=config.node_name, program=SESSION_PROGRAM, argv=(),
                domain_id=config.domain_id))
        self._node = node
        self._endpoints: List[Any] = []
        """Publishers and subscriptions made here, destroyed on close."""

    def _made(self, endpoint):
        destroy = (self._node.destroy_publisher if isinstance(endpoint, Writer)
                   else self._node.destroy_subscription)
        self._endpoints.append((destroy, endpoint.endpoint))
        return endpoint

    def lowcmd_writer(self) -> Ros2Writer:
        return self._made(Ros2Writer(self._node, self._types["cmd"], LOWCMD_ROS_TOPIC, LOWCMD))

    def lowstate_writer(self, crc: bool = True) -> Ros2Writer:
        return self._made(Ros2Writer(self._node, self._types["state"], LOWSTATE_ROS_TOPIC,
                                     LOWSTATE, crc))

    def lowcmd_reader(self, check_crc: bool = True, depth: int = 1) -> Ros2Reader:
        return self._made(Ros2Reader(self._node, self._types["cmd"], LOWCMD_ROS_TOPIC, LOWCMD,
                                     check_crc, depth))

    def lowstate_reader(self, check_crc: bool = True) -> Ros2Reader:
        return self._made(Ros2Reader(self._node, self._types["state"], LOWSTATE_ROS_TOPIC,
                                     LOWSTATE, check_crc))

    def close(self) -> None:
        """Destroy what this transport made: its endpoints, and its own session's node if any."""
        for destroy, endpoint in self._endpoints:
            destroy(endpoint)
        self._endpoints.clear()
        self._session.close()
