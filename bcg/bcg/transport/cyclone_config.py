"""Cyclone DDS XML configuration from a `TransportConfig`: given to the direct transport's Domain, and
to rmw_cyclonedds_cpp inline in CYCLONEDDS_URI (`bcg.transport.endpoint`)."""
import re

from bcg.transport import TransportConfig

_NAME = re.compile(r"^[A-Za-z0-9_.:\-]+$")
MAX_AUTO_PARTICIPANT_INDEX = 32
"""Participants per domain and host that unicast-only discovery can find (ports probed)."""


def _checked(key: str, value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{key}: {value!r} is not a valid interface name or address")
    return value


def cyclone_config_xml(config: TransportConfig) -> str:
    """The ``<CycloneDDS>`` document for `config`'s domain, interface, peers and multicast.

    Robot: the wired interface, multicast as Cyclone defaults. Simulation / tests: ``lo``,
    multicast off, unicast peer 127.0.0.1 (loopback cannot multicast), participant indices
    assigned automatically so that peers on the same host find each other's ports. No interface
    (None): no ``<Interfaces>`` element, so Cyclone picks one, or keeps the one another
    configuration fragment selected (ROS 2's for ROS_LOCALHOST_ONLY).
    """
    interfaces = ""
    if config.interface is not None:
        interfaces = (f'<Interfaces><NetworkInterface name="{_checked("interface", config.interface)}"/>'
                      f'</Interfaces>')
    peers = "".join(f'<Peer address="{_checked("peers", p)}"/>' for p in config.peers)
    discovery = ""
    if peers:
        discovery = (f"<Discovery><ParticipantIndex>auto</ParticipantIndex>"
                     f"<MaxAutoParticipantIndex>{MAX_AUTO_PARTICIPANT_INDEX}"
                     f"</MaxAutoParticipantIndex><Peers>{peers}</Peers></Discovery>")
    multicast = "default" if config.multicast else "false"
    return (f'<?xml version="1.0" encoding="UTF-8"?>'
            f'<CycloneDDS xmlns="https://cdds.io/config"><Domain Id="{int(config.domain_id)}">'
            f"<General>{interfaces}"
            f"<AllowMulticast>{multicast}</AllowMulticast></General>"
            f"{discovery}</Domain></CycloneDDS>")

