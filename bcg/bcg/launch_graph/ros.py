"""A `LaunchGraph` as a launch_ros `LaunchDescription` (imported only by the launch/*.launch.py files,
on machines with ROS 2; `launch` and `launch_ros` are imported inside the functions).

The same lifecycle as `bcg launch` (see `graph.py`): when the main process exits, the services get
SIGINT (the policy node then damps for 1 s); when the last service has exited the final processes
start; when a final process exits, or a service of a graph without a main process, the launch
shuts down.
"""
import signal
from typing import List

from .graph import LaunchGraph, ProcessSpec


def generate(graph: LaunchGraph):
    """`generate_launch_description()` of a launch file for `graph`."""
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

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


def actions(specs: List[ProcessSpec]) -> list:
    """Node / ExecuteProcess actions plus the event handlers of the lifecycle."""
    from launch.actions import EmitEvent, RegisterEventHandler, Shutdown
    from launch.event_handlers import OnProcessExit
    from launch.events import matches_action
    from launch.events.process import SignalProcess

    acts = {s.name: _action(s) for s in specs}
    mains = [s for s in specs if s.role == "main"]
    services = [s for s in specs if s.role == "service"]
    finals = [s for s in specs if s.role == "final"]
    out = [acts[s.name] for s in mains + services]
    for m in mains:
        out.append(RegisterEventHandler(OnProcessExit(target_action=acts[m.name], on_exit=[
            EmitEvent(event=SignalProcess(signal_number=signal.SIGINT, process_matcher=matches_action(acts[s.name])))
            for s in services] or [acts[f.name] for f in finals] or [Shutdown(reason=f"{m.name} finished")])))
    for s in services:
        after = [acts[f.name] for f in finals] if (mains and finals) else [Shutdown(reason=f"{s.name} exited")]
        out.append(RegisterEventHandler(OnProcessExit(target_action=acts[s.name], on_exit=after)))
    for f in finals:
        out.append(RegisterEventHandler(OnProcessExit(target_action=acts[f.name],
                                                      on_exit=[Shutdown(reason=f"{f.name} finished")])))
    return out
