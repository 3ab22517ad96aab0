"""ROS 2 parameters read the same way by every node, with or without rclpy.

A parameter YAML holds `<node_name>:` (or `/<node_name>:`, or `/**:` for every node) sections with a
`ros__parameters` mapping; values are checked against a typed dataclass config. A node's settings
come in layers (`layered_parameters`): the dataclass defaults, its own `--params` file, then the ROS 2
command line's parameters (`--ros-args --params-file FILE -p NAME:=VALUE`, read here before rclpy
starts, so that a parameter such as `domain` can decide how it starts), then the node's own flags.
"""
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

from bcg.config_check import ConfigError, convert_fields, split_assignment, yaml_value

ROS_OWN_PARAMETERS = ("use_sim_time", "start_type_description_service")
"""Parameters rclpy declares on every node itself; a ROS 2 command line may set them, no config holds them."""


def _node_sections(doc: Any, node_name: str) -> List[str]:
    return [k for k in ("/**", node_name, "/" + node_name) if isinstance(doc, dict) and k in doc]


def read_ros_parameters(path: Union[str, Path], node_name: str, required: bool = True) -> Dict[str, Any]:
    """The `ros__parameters` for `node_name`: the `/**` section, then `<node_name>` and
    `/<node_name>` over it; other nodes' sections are ignored. A file without a section for the node
    is an error when `required`, else it gives nothing (a ROS 2 launch's file for other nodes)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read parameter file {path}: {e}") from None
    sections = _node_sections(doc, node_name)
    if not sections and required:
        raise ConfigError(f"parameter file {path}: no `{node_name}:` or `/**:` section with `ros__parameters`")
    params: Dict[str, Any] = {}
    for key in sections:
        section = doc[key]
        if not isinstance(section, dict) or not isinstance(section.get("ros__parameters"), dict):
            raise ConfigError(f"parameter file {path}: section `{key}` has no `ros__parameters` mapping")
        params.update(section["ros__parameters"])
    return params


def without_ros_arguments(argv: Sequence[str]) -> List[str]:
    """`argv` without its ROS 2 sections: each runs from `--ros-args` to a lone `--` or the end (what
    rclpy's `remove_ros_args` does, without rclpy). The rest is the program's own flags."""
    return [arg for arg, in_ros in _classified(argv) if not in_ros]


def ros_arguments(argv: Sequence[str]) -> List[str]:
    """The arguments inside `argv`'s ROS 2 sections (`--ros-args ... [--]`), in order."""
    return [arg for arg, in_ros in _classified(argv) if in_ros]


def _classified(argv: Sequence[str]):
    """(argument, inside a ROS 2 section) for every argument but the section markers."""
    in_ros = False
    for arg in argv:
        if arg == "--ros-args":
            in_ros = True
        elif in_ros and arg == "--":
            in_ros = False
        else:
            yield arg, in_ros


def _assignment(rule: str, option: str) -> Tuple[str, str]:
    try:
        return split_assignment(rule, ":=", example="domain:=3", parse_value=False)
    except ConfigError as e:
        raise ConfigError(f"ROS 2 argument `{option} {rule}`: {e}") from None


def ros_argument_parameters(argv: Sequence[str], node_name: str) -> Dict[str, Any]:
    """The parameters a ROS 2 command line gives node `node_name`, as rcl will apply them: every
    `--params-file FILE` in order (its `/**`, `<node>` and `/<node>` sections; the node name as a
    `-r __node:=NAME` remapping leaves it), then every `-p [NODE:]NAME:=VALUE` (the value read as
    YAML, as rcl reads it). Parameters rclpy declares itself (`ROS_OWN_PARAMETERS`) are left out."""
    args = ros_arguments(argv)
    name = node_name
    files: List[str] = []
    rules: List[tuple] = []
    for option, value in zip(args, args[1:] + [None]):
        if option in ("-r", "--remap") and value is not None:
            target, replacement = _assignment(value, option)
            if target == "__node":
                name = replacement
        elif option == "--params-file" and value is not None:
            files.append(value)
        elif option in ("-p", "--param") and value is not None:
            rules.append(_assignment(value, option))
    params: Dict[str, Any] = {}
    for path in files:
        params.update(read_ros_parameters(path, name, required=False))
    for key, text in rules:
        owner, sep, key = key.rpartition(":")
        if sep and owner.lstrip("/") != name:
            continue
        params[key] = yaml_value(text, f"ROS 2 argument `-p {key}:={text}`")
    return {k: v for k, v in params.items() if k not in ROS_OWN_PARAMETERS}


def layered_parameters(config_cls, node_name: str, params_file: Optional[Union[str, Path]] = None,
                       argv: Sequence[str] = (), flags: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A node's settings over the dataclass `config_cls`'s defaults, each layer over the one before:
    `params_file`'s `ros__parameters` (the node's `--params`), the ROS 2 command line's parameters in
    `argv` (`ros_argument_parameters`), then `flags` (the node's own command-line flags). Every name
    and type is checked (`bcg.config_check.convert_fields`: an error names `<node_name>.<name>`); the
    result holds only what the layers set."""
    values: Dict[str, Any] = {}
    for layer in (read_ros_parameters(params_file, node_name) if params_file else {},
                  ros_argument_parameters(argv, node_name), flags or {}):
        values.update(convert_fields(config_cls, layer, f"{node_name}."))
    return values
