"""ROS 2 parameter files read the same way by every node, with or without rclpy.

A parameter YAML holds `<node_name>:` (or `/<node_name>:`, or `/**:` for every node) sections with a
`ros__parameters` mapping; values are checked against a typed dataclass config.
"""
from dataclasses import fields
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Union

import yaml


class ParameterError(ValueError):
    """A parameter file or value is unusable; the message names the file, node and key."""


def read_ros_parameters(path: Union[str, Path], node_name: str) -> Dict[str, Any]:
    """The `ros__parameters` for `node_name`: the `/**` section, then `<node_name>` and
    `/<node_name>` over it; other nodes' sections are ignored."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ParameterError(f"cannot read parameter file {path}: {e}") from None
    sections = [k for k in ("/**", node_name, "/" + node_name) if isinstance(doc, dict) and k in doc]
    if not sections:
        raise ParameterError(f"parameter file {path}: no `{node_name}:` or `/**:` section with `ros__parameters`")
    params: Dict[str, Any] = {}
    for key in sections:
        section = doc[key]
        if not isinstance(section, dict) or not isinstance(section.get("ros__parameters"), dict):
            raise ParameterError(f"parameter file {path}: section `{key}` has no `ros__parameters` mapping")
        params.update(section["ros__parameters"])
    return params


def coerce_parameters(values: Mapping[str, Any], config_cls, node_name: str) -> Dict[str, Any]:
    """Check names and types of `values` against the dataclass `config_cls` (ints are accepted for
    floats, None for strings); an unknown key or a wrong type is a ParameterError naming it."""
    types = {f.name: f.type for f in fields(config_cls)}
    out = {}
    for key, value in values.items():
        want = types.get(key)
        if want is None:
            raise ParameterError(f"unknown {node_name} parameter `{key}`; known: {', '.join(sorted(types))}")
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if want is str and value is None:
            value = ""
        if type(value) is not want:
            raise ParameterError(f"{node_name} parameter `{key}` = {value!r}: expected {want.__name__}, "
                                 f"got {type(value).__name__}")
        out[key] = value
    return out


def without_ros_arguments(argv: Sequence[str]) -> List[str]:
    """`argv` without its ROS 2 sections: each runs from `--ros-args` to a lone `--` or the end (what
    rclpy's `remove_ros_args` does, without rclpy). The rest is the program's own flags."""
    own, in_ros = [], False
    for arg in argv:
        if arg == "--ros-args":
            in_ros = True
        elif in_ros and arg == "--":
            in_ros = False
        elif not in_ros:
            own.append(arg)
    return own
