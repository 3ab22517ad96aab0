"""Launch graphs described once, run by `bcg launch` (supervised processes) or by launch_ros."""
from .graph import LaunchArgument, LaunchArgumentError, LaunchGraph, ProcessSpec, as_bool, as_number, parse_assignments
from .graphs import G1_RUN, GRAPHS, MUJOCO_CHECK, run_files
from .supervisor import Supervisor

__all__ = ["G1_RUN", "GRAPHS", "LaunchArgument", "LaunchArgumentError", "LaunchGraph", "MUJOCO_CHECK", "ProcessSpec",
           "Supervisor", "as_bool", "as_number", "parse_assignments", "run_files"]
