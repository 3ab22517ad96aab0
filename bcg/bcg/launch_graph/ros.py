"""A `LaunchGraph` as a launch_ros `LaunchDescription` (imported only by the launch/*.launch.py files,
on machines with ROS 2; `launch` and `launch_ros` are imported inside the functions).

Written against the ROS 2 Humble APIs of `launch` / `launch_ros` (also in Jazzy): DeclareLaunchArgument,
OpaqueFunction, LaunchConfiguration, launch_ros.actions.Node, ExecuteProcess, RegisterEventHandler with
OnProcessExit (a callable `on_exit(event, context)`; `event.returncode`), EmitEvent of SignalProcess
with matches_action, Shutdown.

The same lifecycle as `bcg launch` (`lifecycle.py`): every process exit is a `Lifecycle` decision.
`ros2 launch` itself exits 0 whatever its processes return; the one way for a process's failure to
become its exit code is an exception in an event handler (launch logs it, shuts everything down and
returns 1), so a failure decision raises `LaunchFailure`.
"""
import signal
from typing import Dict, List

from .graph import LaunchGraph, ProcessSpec
from .lifecycle import Decision, Lifecycle


class LaunchFailure(RuntimeError):
    """A process of the launch failed: raised in an exit handler so that `ros2 launch` exits 1."""


def generate(graph: LaunchGraph):
    """`generate_launch_description()` of a launch file for `graph`."""
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    from launch import LaunchDescription

    def setup(context, *args, **kwargs):
        values = {a.name: LaunchConfiguration(a.name).perform(context) for a in graph.arguments}
        return actions(graph.processes(values))
    declared = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
                for a in graph.arguments]
    return LaunchDescription(declared + [OpaqueFunction(function=setup)])


def _action(spec: ProcessSpec):
    if spec.role == "final":   # a plain program, not a ROS node: no --ros-args
        import os

        from ament_index_python.packages import get_package_prefix
        from launch.actions import ExecuteProcess
        exe = os.path.join(get_package_prefix(spec.package), "lib", spec.package, spec.executable)
        return ExecuteProcess(cmd=[exe, *spec.arguments], name=spec.name, output="screen")
    from launch_ros.actions import Node
    return Node(package=spec.package, executable=spec.executable, name=spec.name, arguments=list(spec.arguments),
                parameters=list(spec.parameters), output="screen")


def _launch_actions(decision: Decision, acts: Dict[str, object]) -> list:
    """The launch actions of a lifecycle decision; raises LaunchFailure for a failure."""
    from launch.actions import EmitEvent, Shutdown
    from launch.events import matches_action
    from launch.events.process import SignalProcess
    if decision.failure:
        raise LaunchFailure(decision.failure)
    out = [EmitEvent(event=SignalProcess(signal_number=signal.SIGINT, process_matcher=matches_action(acts[name])))
           for name in decision.signal]
    out += [acts[name] for name in decision.start]
    if decision.shutdown:
        out.append(Shutdown(reason=decision.shutdown))
    return out


def actions(specs: List[ProcessSpec]) -> list:
    """The first processes' actions plus one exit handler per process (finals start from a handler)."""
    from launch.actions import RegisterEventHandler
    from launch.event_handlers import OnProcessExit

    acts = {s.name: _action(s) for s in specs}
    life = Lifecycle(specs)

    def on_exit(name: str):
        return lambda event, context: _launch_actions(life.exited(name, event.returncode), acts)
    return ([acts[s.name] for s in specs if s.role != "final"] +
            [RegisterEventHandler(OnProcessExit(target_action=acts[s.name], on_exit=on_exit(s.name))) for s in specs])
