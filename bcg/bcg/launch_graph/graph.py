"""A launch graph described once: its arguments and the processes they produce.

Both ways of launching read this description: `bcg launch FILE name:=value ...` runs it as
supervised processes (`bcg.launch_graph.supervisor`), and the launch_ros files in launch/ turn it
into `launch_ros.actions.Node` actions (`bcg.launch_graph.ros`).

Process roles (the lifecycle both launchers implement):
- 'service': runs until the launch stops it; exiting on its own is a failure that stops the rest.
- 'main': its exit ends the run: success (0) stops the services, then the 'final' processes run.
- 'final': runs after every other process ended; the launch's exit code is its exit code.
A graph without a 'main' process runs until Ctrl-C (or until a service dies).
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Tuple

from bcg.config_check import ConfigError, at_least, check_value, config_error, split_assignment, yaml_value

ROLES = ("service", "main", "final")


class LaunchArgumentError(ValueError):
    """An unknown argument, a malformed `name:=value`, or a bad value; the message names it."""


@dataclass(frozen=True)
class LaunchArgument:
    name: str
    default: str
    description: str


@dataclass(frozen=True)
class ProcessSpec:
    """One process of the graph."""

    name: str
    """Short unique name (log prefix, ROS node name)."""
    package: str
    """ROS 2 package of the executable."""
    executable: str
    """ROS 2 executable (installed in lib/<package>/)."""
    console: str
    """The same program's console command off ROS 2 (on PATH of the Python environment)."""
    arguments: Tuple[str, ...] = ()
    """Command-line arguments (the same for both launchers)."""
    role: str = "service"
    parameters: Tuple[str, ...] = ()
    """ROS 2 parameter YAML files (ROS 2 launch: `parameters=`; the arguments already name them for `bcg launch`)."""

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"{self.name}: role {self.role!r} is not one of {ROLES}")


@dataclass(frozen=True)
class LaunchGraph:
    name: str
    description: str
    arguments: Tuple[LaunchArgument, ...]
    build: Callable[[Dict[str, str]], List[ProcessSpec]] = field(repr=False)
    """Arguments (every name, resolved) -> the processes to start."""

    def resolve(self, given: Mapping[str, str]) -> Dict[str, str]:
        """Defaults overridden by `given`; LaunchArgumentError for a name the graph does not declare."""
        known = {a.name: a.default for a in self.arguments}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise LaunchArgumentError(f"{self.name}: unknown argument(s) {unknown}; known: {', '.join(known)}")
        return {**known, **given}

    def processes(self, given: Mapping[str, str]) -> List[ProcessSpec]:
        return self.build(self.resolve(given))

    def usage(self) -> str:
        lines = [f"{self.name}: {self.description}", "arguments:"]
        lines += [f"  {a.name}:={a.default!r:<24} {a.description}" for a in self.arguments]
        return "\n".join(lines)


def parse_assignments(items) -> Dict[str, str]:
    """['policy:=x.onnx', 'duration:=10'] -> {'policy': 'x.onnx', 'duration': '10'}: the one KEY=VALUE
    reader (`bcg.config_check.split_assignment`), the values left as text (ROS 2 launch's)."""
    try:
        return dict(split_assignment(item, ":=", example="policy:=p.onnx", parse_value=False) for item in items)
    except ConfigError as e:
        raise LaunchArgumentError(str(e)) from None


TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off", "")


def as_bool(name: str, value: str) -> bool:
    """Launch-argument booleans, as ROS 2 launch spells them."""
    v = value.strip().lower()
    if v in TRUE_WORDS + FALSE_WORDS:
        return v in TRUE_WORDS
    raise LaunchArgumentError(str(config_error(name, value, "not a boolean", "true or false")))


def as_number(name: str, value: str, kind=float, minimum=None):
    """A launch argument's text as a `kind` (int or float) >= `minimum` (`bcg.config_check.check_value`)."""
    try:
        return check_value(name, yaml_value(value, f"{name}:={value}"), kind,
                           None if minimum is None else at_least(minimum))
    except ConfigError as e:
        raise LaunchArgumentError(str(e)) from None
