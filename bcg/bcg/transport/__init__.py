"""How nodes exchange `LowCmd` / `LowState` with the robot or the simulator.

One small interface, two implementations:

- ``'dds'``  : Cyclone DDS used directly (``bcg.transport.dds``), topics ``rt/lowcmd`` /
  ``rt/lowstate`` with the robot's own type names, so it talks to the G1, to Unitree's SDKs and to
  ROS 2 nodes on the Cyclone RMW alike. Needs no ROS.
- ``'ros2'`` : rclpy with ``unitree_hg/msg/LowCmd`` / ``LowState`` from unitree_ros2, topics
  ``/lowcmd`` / ``/lowstate`` (``bcg.transport.ros2``).
- ``'auto'`` : ``'ros2'`` on a given ROS 2 node, else ``'dds'``. Which one a node uses, on which
  domain and interface, is decided once, for both nodes, by `bcg.transport.endpoint`.

Messages are numpy structured records from ``bcg.wire`` (``new_lowcmd()``, ``new_lowstate()``);
nothing here hands out middleware objects. Usage::

    from bcg.transport import TransportConfig, make_transport
    from bcg.wire import new_lowcmd
    with make_transport(TransportConfig.simulation()) as transport:
        states = transport.lowstate_reader(check_crc=False)   # Unitree's own sim sends crc = 0
        commands = transport.lowcmd_writer()
        state = states.wait(timeout_s=1.0)                    # record or None
        cmd = new_lowcmd(); cmd['mode_machine'] = state['mode_machine']
        commands.write(cmd)                                   # sets cmd['crc']

Threading: ``Writer.write`` and ``Reader.take`` / ``Reader.wait`` may be called from any thread;
a reader keeps only the newest valid sample (a 500 Hz consumer wants the latest, not a queue),
unless made with a deeper ``depth`` to see every sample (``take_all``), as the simulator does to
validate and count every LowCmd the controller sent.
"""
import abc
import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np

from bcg.config_check import Rule, one_of

TRANSPORT_KINDS = ("auto", "ros2", "dds")
MAX_DOMAIN_ID = 232
"""DDS domain ids are 0..MAX_DOMAIN_ID."""
TRANSPORT_SETTING = one_of(*TRANSPORT_KINDS)
"""The rule of a node's `transport` setting (`bcg.config_check.setting`)."""
DOMAIN_SETTING = Rule(low=0, high=MAX_DOMAIN_ID, also=(-1,),
                      expected=f"a DDS domain id 0..{MAX_DOMAIN_ID}, or -1 (unset)")
"""The rule of a node's `domain` setting (-1: decided at start, `bcg.transport.endpoint`)."""
DROP_REASONS = ("crc", "malformed")
"""Why a reader drops a sample: its CRC is wrong (when it checks CRCs), or it cannot be decoded
(wrong size, unknown encoding, arrays of the wrong length)."""


@dataclasses.dataclass(frozen=True)
class TransportConfig:
    """Where and how to reach the robot (or the simulator)."""

    transport: str = "auto"
    """'auto' (ROS 2 on a given ROS 2 node, else direct DDS), 'ros2' or 'dds'."""
    domain_id: int = 0
    """DDS domain id: 0 on the real robot, 1 for Unitree's MuJoCo simulator."""
    interface: Optional[str] = None
    """Network interface Cyclone binds to (the wired one to the robot, e.g. 'eth0'; 'lo' in
    simulation). None: Cyclone picks (direct DDS); for ROS 2, leave CYCLONEDDS_URI as it is."""
    peers: Tuple[str, ...] = ()
    """Unicast peer addresses (e.g. ('127.0.0.1',) on loopback, which cannot multicast)."""
    multicast: bool = True
    """Allow multicast discovery and data; must be False on 'lo'."""
    node_name: str = "bcg"
    """ROS 2 node name (ROS 2 transport only, when it creates its own node)."""

    def __post_init__(self):
        if self.transport not in TRANSPORT_KINDS:
            raise ValueError(f"transport: {self.transport!r} is not one of {TRANSPORT_KINDS}")
        if not 0 <= int(self.domain_id) <= MAX_DOMAIN_ID:
            raise ValueError(f"domain_id: {self.domain_id!r} is outside 0..{MAX_DOMAIN_ID}")
        object.__setattr__(self, "peers", tuple(self.peers))

    @classmethod
    def robot(cls, interface: str, transport: str = "auto") -> "TransportConfig":
        """The real G1: domain 0 on the wired interface (192.168.123.0/24)."""
        return cls(transport=transport, domain_id=0, interface=interface)

    @classmethod
    def simulation(cls, domain_id: int = 1, transport: str = "auto") -> "TransportConfig":
        """A simulator on this machine: loopback, unicast peer 127.0.0.1, no multicast."""
        return cls(transport=transport, domain_id=domain_id, interface="lo",
                   peers=("127.0.0.1",), multicast=False)


class Writer(abc.ABC):
    """Publishes one message type."""

    @abc.abstractmethod
    def write(self, rec: np.void) -> None:
        """Send `rec` (a record from ``bcg.wire``); sets ``rec['crc']`` first (0 for a writer made
        with ``crc=False``)."""


class Reader(abc.ABC):
    """Receives one message type and keeps the newest valid samples (`depth` of them, default 1).

    Invalid DDS samples (instance state changes) are skipped; samples whose CRC is wrong (when the
    reader checks CRCs) or that cannot be decoded are dropped and counted by reason in ``dropped``.
    """

    received: int
    """Valid samples received so far."""
    dropped: Dict[str, int]
    """Samples dropped so far, by reason (`DROP_REASONS`)."""

    @abc.abstractmethod
    def take(self) -> Optional[np.void]:
        """The newest valid sample not returned before, or None when nothing new arrived."""

    @abc.abstractmethod
    def take_all(self) -> List[np.void]:
        """Every valid sample received since the last take, oldest first (at most `depth`, the newest)."""

    @abc.abstractmethod
    def wait(self, timeout_s: float) -> Optional[np.void]:
        """Like `take`, but blocks up to `timeout_s` seconds for a new sample."""

    @abc.abstractmethod
    def wait_all(self, timeout_s: float) -> List[np.void]:
        """Like `take_all`, but blocks up to `timeout_s` seconds for a new sample (empty: none came)."""


class Transport(abc.ABC):
    """A connection to one DDS domain / ROS 2 graph; a context manager that closes itself."""

    kind: str
    """'dds' or 'ros2': what 'auto' resolved to."""

    @abc.abstractmethod
    def lowcmd_writer(self) -> Writer:
        """Publisher of LowCmd (host -> robot)."""

    @abc.abstractmethod
    def lowstate_writer(self, crc: bool = True) -> Writer:
        """Publisher of LowState (robot / simulator -> host); `crc` False sends crc = 0, as Unitree's
        MuJoCo simulator does (to emulate it)."""

    @abc.abstractmethod
    def lowcmd_reader(self, check_crc: bool = True, depth: int = 1) -> Reader:
        """Subscriber to LowCmd; with `check_crc`, drops commands with a wrong CRC (as the robot).
        `depth`: samples kept between two takes (history depth of the subscription too)."""

    @abc.abstractmethod
    def lowstate_reader(self, check_crc: bool = True) -> Reader:
        """Subscriber to LowState; turn `check_crc` off for senders that leave crc = 0."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release every entity; the transport is unusable afterwards."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def make_transport(config: TransportConfig, ros_node=None) -> Transport:
    """Open the transport `config.transport` names.

    `ros_node`: an existing rclpy Node to attach to (ROS 2 only; the caller spins it). Without
    one, the ROS 2 transport creates its own node and spins it in a background thread. 'auto' is
    'ros2' with a `ros_node`, else 'dds'. ROS 2 needs rclpy and unitree_hg (ModuleNotFoundError).
    """
    if config.transport == "ros2" or (config.transport == "auto" and ros_node is not None):
        from bcg.transport.ros2 import Ros2Transport
        return Ros2Transport(config, node=ros_node)
    if ros_node is not None:
        raise ValueError("ros_node: given, but the transport is 'dds'")
    from bcg.transport.dds import DdsTransport
    return DdsTransport(config)


__all__ = ["DROP_REASONS", "TRANSPORT_KINDS", "TransportConfig", "Writer", "Reader", "Transport", "make_transport"]
