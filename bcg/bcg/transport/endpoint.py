"""Which transport, which DDS domain and which network interface a node uses: one rule, both nodes.

A node process is a ROS 2 node when it was started as one (`runs_as_ros_node`): its command line
has a `--ros-args` section (`ros2 launch` always adds one; `ros2 run PKG EXE --ros-args ...`), it was
started as its ROS 2 executable (`policy_node`, `sim_bridge`: what `ros2 run` starts) where rclpy
imports, or its `transport` parameter is 'ros2'. Otherwise (`bcg-policy-node`, `bcg-sim-bridge`,
`bcg launch`) it talks Cyclone DDS directly. Then (`resolve_endpoint`):

- transport: 'ros2' in a ROS 2 node, 'dds' otherwise ('auto' means exactly that). A ROS 2 node never
  opens a direct Cyclone domain beside its rclpy context: rmw_cyclonedds_cpp and the Python binding
  share one libddsc, which refuses to configure the same domain twice, so `transport: dds` there
  is an error.
- domain: the `domain` setting when it is >= 0 (flag `--domain`, ROS parameter `domain` from
  `-p domain:=N` or a parameter file); when it is -1 (unset): `$ROS_DOMAIN_ID` in a ROS 2 node,
  else the node's own fallback (the policy node 0, the robot; the bridge 1, Unitree's simulator).
- interface: direct DDS configures Cyclone itself (`cyclone_config_xml`; 'lo' means loopback with
  unicast peer 127.0.0.1 and no multicast). A ROS 2 node's Cyclone is configured by the
  environment rmw_cyclonedds_cpp reads (`ros2_cyclone_uri`): an existing `CYCLONEDDS_URI` is left
  as it is; with `ROS_LOCALHOST_ONLY=1` ROS 2 itself selects loopback, so the interface is not
  named again (Cyclone refuses an interface selected twice); otherwise the configuration goes into
  `CYCLONEDDS_URI` as inline XML (no file is written, so none is left behind).

Everything here is pure: the facts of how the process started come in a `NodeStart`.
"""
import dataclasses
import importlib.util
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple, Union

from bcg.config_check import ConfigError
from bcg.node_log import log_to_console
from bcg.ros_params import layered_parameters
from bcg.transport import MAX_DOMAIN_ID, TRANSPORT_KINDS, TransportConfig
from bcg.transport.cyclone_config import cyclone_config_xml

ROS_ENVIRONMENT = ("ROS_DOMAIN_ID", "ROS_LOCALHOST_ONLY", "CYCLONEDDS_URI", "RMW_IMPLEMENTATION")
"""The environment variables the rule reads."""
CYCLONE_RMW = "rmw_cyclonedds_cpp"
"""The ROS 2 middleware unitree_ros2 requires (the only one that reads a Cyclone configuration)."""
LOOPBACK = "lo"


class EndpointError(ValueError):
    """The settings and the environment contradict each other; the message names both."""


@dataclasses.dataclass(frozen=True)
class NodeStart:
    """How a node process was started: the facts `resolve_endpoint` decides from."""

    program: str
    """sys.argv[0]: which executable was started (its base name matters)."""
    argv: Tuple[str, ...]
    """The command line after the program name (own flags and ROS 2 sections)."""
    rclpy_available: bool
    """Whether `import rclpy` can work (a sourced ROS 2 installation)."""
    environ: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The `ROS_ENVIRONMENT` variables that are set."""

    @classmethod
    def of_this_process(cls, argv: Optional[Sequence[str]] = None) -> "NodeStart":
        """This process's facts (`argv`: the command line after the program name; default sys.argv's)."""
        return cls(program=sys.argv[0], argv=tuple(sys.argv[1:] if argv is None else argv),
                   rclpy_available=importlib.util.find_spec("rclpy") is not None,
                   environ={k: os.environ[k] for k in ROS_ENVIRONMENT if k in os.environ})


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """What `resolve_endpoint` chose."""

    ros: bool
    """True: a ROS 2 node (rclpy context, parameters, logging to rclpy's logger)."""
    transport: TransportConfig
    """Transport kind ('ros2' or 'dds', never 'auto'), domain id, interface, peers, multicast."""
    cyclone_uri: Optional[str]
    """ROS 2 only: the CYCLONEDDS_URI to set before rclpy starts; None: leave the environment alone."""
    notes: Tuple[str, ...]
    """One line per choice, saying what was chosen and why (for the node's start-up log)."""

    @property
    def domain_id(self) -> int:
        return int(self.transport.domain_id)

    def apply_environment(self, environ=None) -> None:
        """Set `cyclone_uri` as CYCLONEDDS_URI in `environ` (default os.environ; read by rclpy, and
        inherited by child processes) when there is one; call it before rclpy starts."""
        if self.cyclone_uri is not None:
            (os.environ if environ is None else environ)["CYCLONEDDS_URI"] = self.cyclone_uri


def runs_as_ros_node(start: NodeStart, ros_executable: str, transport: str) -> bool:
    """The rule for "is this a ROS 2 node" (module docstring); raises EndpointError when ROS 2 is asked
    for (`--ros-args`, transport 'ros2') where rclpy cannot be imported."""
    asked = "--ros-args" in start.argv or transport == "ros2"
    if asked and not start.rclpy_available:
        why = "a --ros-args section" if "--ros-args" in start.argv else "transport 'ros2'"
        raise EndpointError(f"{why} asks for a ROS 2 node, but rclpy cannot be imported: source ROS 2 first "
                            "(source /opt/ros/humble/setup.bash and the workspace's install/setup.bash)")
    return asked or (os.path.basename(start.program) == ros_executable and start.rclpy_available)


def _domain(domain: int, ros: bool, environ: Mapping[str, str], fallback: int) -> Tuple[int, str]:
    if domain >= 0:
        return domain, f"domain {domain} (setting `domain`)"
    text = environ.get("ROS_DOMAIN_ID", "").strip() if ros else ""
    if text:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if not 0 <= value <= MAX_DOMAIN_ID:
            raise EndpointError(f"ROS_DOMAIN_ID={text!r} is not a DDS domain id (0..{MAX_DOMAIN_ID})")
        return value, f"domain {value} ($ROS_DOMAIN_ID; setting `domain` is -1)"
    return fallback, f"domain {fallback} (the node's default; setting `domain` is -1" + \
        (", $ROS_DOMAIN_ID unset)" if ros else ")")


def transport_settings(kind: str, domain_id: int, interface: str, node_name: str) -> TransportConfig:
    """The transport for `interface`: '' lets Cyclone (or ROS 2) choose; 'lo' is loopback with unicast
    peer 127.0.0.1 and no multicast (loopback cannot multicast); any other name binds Cyclone to it."""
    if interface == LOOPBACK:
        return dataclasses.replace(TransportConfig.simulation(domain_id=domain_id, transport=kind),
                                   node_name=node_name)
    return TransportConfig(transport=kind, domain_id=domain_id, interface=interface or None, node_name=node_name)


def ros2_cyclone_uri(config: TransportConfig, environ: Mapping[str, str]) -> Tuple[Optional[str], str]:
    """(CYCLONEDDS_URI to set before rclpy starts or None to leave it, a note saying why) for a ROS 2
    transport on `config`'s interface, given the environment rmw_cyclonedds_cpp will also read."""
    interface = config.interface
    if "CYCLONEDDS_URI" in environ:
        return None, ("CYCLONEDDS_URI is set: Cyclone is configured by it" +
                      (f" (interface {interface!r} not applied)" if interface else ""))
    rmw = environ.get("RMW_IMPLEMENTATION", "")
    if rmw and rmw != CYCLONE_RMW:
        return None, (f"RMW_IMPLEMENTATION={rmw}: no Cyclone configuration applies (unitree_ros2 needs "
                      f"{CYCLONE_RMW})" + (f"; interface {interface!r} not applied" if interface else ""))
    if environ.get("ROS_LOCALHOST_ONLY", "") == "1":
        if interface not in (None, LOOPBACK):
            raise EndpointError(f"interface {interface!r}: ROS_LOCALHOST_ONLY=1 keeps ROS 2 on loopback, where "
                                "that interface cannot be reached; unset ROS_LOCALHOST_ONLY (or use interface lo)")
        if interface is None:
            return None, "ROS_LOCALHOST_ONLY=1: ROS 2 selects loopback itself"
        return (cyclone_config_xml(dataclasses.replace(config, interface=None)),
                "ROS_LOCALHOST_ONLY=1: ROS 2 selects loopback itself; inline Cyclone configuration in "
                "CYCLONEDDS_URI for its peer 127.0.0.1 only (the interface is not named twice)")
    if interface is None:
        return None, "interface: Cyclone's choice (no interface set)"
    return cyclone_config_xml(config), f"interface {interface!r}: inline Cyclone configuration in CYCLONEDDS_URI"


def resolve_endpoint(start: NodeStart, *, transport: str, domain: int, interface: str, node_name: str,
                     ros_executable: str, fallback_domain: int) -> Endpoint:
    """The node's transport, domain and interface from its settings (`transport`: 'auto', 'ros2' or
    'dds'; `domain`: >= 0, or -1 for unset; `interface`: '' for none) and how it was started (module
    docstring). Raises EndpointError naming the contradiction."""
    if transport not in TRANSPORT_KINDS:
        raise EndpointError(f"transport: {transport!r} is not one of {TRANSPORT_KINDS}")
    ros = runs_as_ros_node(start, ros_executable, transport)
    if ros and transport == "dds":
        raise EndpointError("transport 'dds' in a ROS 2 node: rclpy's Cyclone and a direct Cyclone domain cannot "
                            "share a process (one libddsc refuses to configure the domain twice); use transport "
                            "'auto' or 'ros2' under ROS 2, or start the node without ROS 2 (bcg launch)")
    kind = "ros2" if ros else "dds"
    domain_id, domain_note = _domain(domain, ros, start.environ, fallback_domain)
    config = transport_settings(kind, domain_id, interface, node_name)
    how = ("ROS 2 node (" + ("--ros-args" if "--ros-args" in start.argv else
                             "transport 'ros2'" if transport == "ros2" else f"started as {ros_executable}")
           + "): transport ros2") if ros else "no ROS 2: transport dds (Cyclone DDS directly)"
    uri, interface_note = (ros2_cyclone_uri(config, start.environ) if ros else
                           (None, f"interface {interface or 'chosen by Cyclone'}"))
    return Endpoint(ros=ros, transport=config, cyclone_uri=uri, notes=(how, domain_note, interface_note))


def node_settings(config_cls, start: NodeStart, *, node_name: str, ros_executable: str, fallback_domain: int,
                  params_file: Optional[Union[str, Path]] = None,
                  flags: Optional[Mapping[str, Any]] = None) -> Tuple[Any, Endpoint]:
    """(the settings a node runs with, its `Endpoint`): `config_cls` (a dataclass with `transport`,
    `domain` and `interface` fields) filled in layers (`bcg.ros_params.layered_parameters`: the
    node's `--params` file, the ROS 2 command line's `--params-file` / `-p`, its own `flags`), then
    `transport` and `domain` replaced by what `resolve_endpoint` chose: what the node reports (its
    ROS 2 parameters, its log) is what it does. Raises ConfigError or EndpointError."""
    asked = config_cls(**layered_parameters(config_cls, node_name, params_file, start.argv, flags))
    endpoint = resolve_endpoint(start, transport=asked.transport, domain=asked.domain, interface=asked.interface,
                                node_name=node_name, ros_executable=ros_executable, fallback_domain=fallback_domain)
    return dataclasses.replace(asked, transport=endpoint.transport.transport, domain=endpoint.domain_id), endpoint


def begin_node(node_name: str, settings: Callable[[NodeStart], Tuple[Any, Endpoint]], log: logging.Logger,
               argv: Optional[Sequence[str]] = None) -> Optional[Tuple[NodeStart, Any, Endpoint]]:
    """How both nodes start: console logging, this process's `NodeStart`, then `settings(start)`
    (the node's `node_settings`). Returns (start, settings, endpoint), or None when the settings are
    refused (ConfigError, EndpointError: the reason is logged; the caller exits non-zero)."""
    log_to_console(node_name)
    start = NodeStart.of_this_process(argv)
    try:
        config, endpoint = settings(start)
    except (ConfigError, EndpointError) as e:
        log.error("refusing to start: %s", e)
        return None
    return (start, config, endpoint)
