"""Cyclone DDS XML configuration written from a `TransportConfig` (no CYCLONEDDS_URI needed)."""
import os
import re

from bcg.atomic_file import write_text_atomic
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
    assigned automatically so that peers on the same host find each other's ports.
    """
    if config.interface is None:
        interface = '<NetworkInterface autodetermine="true" priority="default"/>'
    else:
        interface = f'<NetworkInterface name="{_checked("interface", config.interface)}"/>'
    peers = "".join(f'<Peer address="{_checked("peers", p)}"/>' for p in config.peers)
    discovery = ""
    if peers:
        discovery = (f"<Discovery><ParticipantIndex>auto</ParticipantIndex>"
                     f"<MaxAutoParticipantIndex>{MAX_AUTO_PARTICIPANT_INDEX}"
                     f"</MaxAutoParticipantIndex><Peers>{peers}</Peers></Discovery>")
    multicast = "default" if config.multicast else "false"
    return (f'<?xml version="1.0" encoding="UTF-8"?>'
            f'<CycloneDDS xmlns="https://cdds.io/config"><Domain Id="{int(config.domain_id)}">'
            f"<General><Interfaces>{interface}</Interfaces>"
            f"<AllowMulticast>{multicast}</AllowMulticast></General>"
            f"{discovery}</Domain></CycloneDDS>")


def write_cyclone_config(config: TransportConfig, path: str) -> str:
    """Write `config`'s XML to `path` atomically; return the ``file://`` URI for CYCLONEDDS_URI."""
    write_text_atomic(path, cyclone_config_xml(config))
    return "file://" + os.path.abspath(path)
