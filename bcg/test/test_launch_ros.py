"""The launch_ros side, checked without ROS 2: launch files, the lifecycle they wire, what they start.

ROS 2 (rclpy, launch, launch_ros) cannot be installed here, so these tests check everything that
does not need it: the launch files compile and hand the shared graph to the shared generator, the
launch_ros names `bcg.launch_graph.ros` uses are the Humble APIs they were written against, every
exit of a process leads to the same decisions as `bcg launch`, and every executable a launch
starts is one its package installs where ROS 2 looks for it (lib/<package>/).
"""
import ast
import configparser
import signal
from pathlib import Path

import pytest

from bcg.cli import find_launch_file, load_graph
from bcg.launch_graph import G1_RUN, GRAPHS, MUJOCO_CHECK
from bcg.launch_graph.lifecycle import Decision, Lifecycle

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.py"))
ROS_SHELLS = [REPO / "bcg_policy_node" / "bcg_policy_node" / "entry" / "ros_node.py",
              REPO / "bcg_sim_bridge" / "bcg_sim_bridge" / "ros_node.py",
              REPO / "bcg" / "bcg" / "transport" / "ros2.py",
              REPO / "bcg" / "bcg" / "launch_graph" / "ros.py"]
HUMBLE_LAUNCH_API = {
    ("launch", "LaunchDescription"), ("launch.actions", "DeclareLaunchArgument"),
    ("launch.actions", "OpaqueFunction"), ("launch.actions", "ExecuteProcess"), ("launch.actions", "EmitEvent"),
    ("launch.actions", "RegisterEventHandler"), ("launch.actions", "Shutdown"),
    ("launch.event_handlers", "OnProcessExit"), ("launch.events", "matches_action"),
    ("launch.events.process", "SignalProcess"), ("launch.substitutions", "LaunchConfiguration"),
    ("launch_ros.actions", "Node"), ("ament_index_python.packages", "get_package_prefix"),
}
"""(module, name) of every launch / launch_ros name `bcg.launch_graph.ros` uses, as documented for ROS 2
Humble (docs.ros.org/en/humble/p/launch, /p/launch_ros). A new one must be checked there, then added."""
DOCUMENTED_ARGUMENTS = {"g1_run": {"policy": None, "motion": None, "network_interface": None, "domain_id": "0"},
                        "mujoco_check": {"policy": None, "motion": None, "duration": None, "headless": None,
                                         "record": None, "verdict": None, "domain_id": "1"}}
"""The launch arguments each launch file declares (and the defaults it fixes)."""


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_files_compile_and_generate_from_their_shared_graph(path):
    tree = ast.parse(path.read_text(), str(path))
    compile(tree, str(path), "exec")
    imports = {(n.module, a.name, a.asname) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    calls = [n for n in ast.walk(functions["generate_launch_description"]) if isinstance(n, ast.Call)]
    assert any(getattr(c.func, "id", "") == "generate" and [getattr(a, "id", "") for a in c.args] == ["GRAPH"]
               for c in calls), "generate_launch_description must return generate(GRAPH)"
    assert ("bcg.launch_graph.ros", "generate", None) in imports
    graph = load_graph(find_launch_file(path.name))
    assert path.name == f"{graph.name}.launch.py" and GRAPHS[graph.name] is graph
    declared = {a.name: a.default for a in graph.arguments}
    for name, default in DOCUMENTED_ARGUMENTS[graph.name].items():
        assert name in declared, f"{path.name} does not declare `{name}`"
        assert default is None or declared[name] == default


def test_every_launch_file_has_a_graph_and_every_graph_a_launch_file():
    assert sorted(p.name for p in LAUNCH_FILES) == sorted(f"{name}.launch.py" for name in GRAPHS)


@pytest.mark.parametrize("path", ROS_SHELLS, ids=lambda p: p.name)
def test_ros_modules_compile(path):
    compile(path.read_text(), str(path), "exec")


def test_launch_ros_names_are_the_humble_apis():
    tree = ast.parse((REPO / "bcg" / "bcg" / "launch_graph" / "ros.py").read_text())
    used = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0
            for a in n.names if n.module.split(".")[0] in ("launch", "launch_ros", "ament_index_python")}
    assert used == HUMBLE_LAUNCH_API


def console_scripts(package: str) -> set:
    """Console script names of `package`'s setup.py (entry_points={'console_scripts': ['name = ...']})."""
    tree = ast.parse((REPO / package / "setup.py").read_text())
    setup = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    entry_points = ast.literal_eval(next(k.value for k in setup.keywords if k.arg == "entry_points"))
    return {line.split("=")[0].strip() for line in entry_points["console_scripts"]}


@pytest.mark.parametrize("graph", [G1_RUN, MUJOCO_CHECK], ids=lambda g: g.name)
def test_every_process_is_an_executable_its_package_installs_for_ros(graph):
    for spec in graph.processes({}):
        assert {spec.executable, spec.console} <= console_scripts(spec.package), spec.name
        cfg = configparser.ConfigParser()
        cfg.read(REPO / spec.package / "setup.cfg")
        assert cfg["install"]["install_scripts"] == f"$base/lib/{spec.package}"   # where launch_ros looks
        assert all(Path(p).is_file() for p in spec.parameters)


# -- lifecycle: what each exit leads to (the same rules as bcg launch's Supervisor) ----------------
def mujoco_check():
    return Lifecycle(MUJOCO_CHECK.processes({}))


def test_mujoco_check_ends_with_its_evaluator():
    life = mujoco_check()
    assert life.exited("sim_bridge", 0) == Decision(signal=("policy_node",))
    assert life.exited("policy_node", 0) == Decision(start=("evaluator",))
    assert life.exited("evaluator", 0) == Decision(shutdown="evaluator finished")


@pytest.mark.parametrize("exits, failure", [
    ([("sim_bridge", 1), ("policy_node", 0), ("evaluator", 1)], "sim_bridge exited with 1"),
    ([("sim_bridge", -9), ("policy_node", 1), ("evaluator", 0)], "sim_bridge exited with -9"),
    ([("policy_node", 2)], "policy_node exited with 2 while the main process was running"),
    ([("policy_node", 0)], "policy_node exited with 0 while the main process was running"),
    ([("sim_bridge", 0), ("policy_node", 1)], "policy_node exited with 1 while being stopped"),
    ([("sim_bridge", 0), ("policy_node", 0), ("evaluator", 1)], "evaluator exited with 1"),
])
def test_mujoco_check_failures_fail_the_launch(exits, failure):
    life = mujoco_check()
    decisions = [life.exited(name, rc) for name, rc in exits]
    assert decisions[-1] == Decision(failure=failure)


def test_a_failed_simulator_still_stops_the_node_and_runs_the_evaluator():
    """A killed bridge: the node is stopped (it damps) and the evaluator writes its verdict (the simulator
    stopped); only then does the launch fail."""
    life = mujoco_check()
    assert life.exited("sim_bridge", -9) == Decision(signal=("policy_node",))
    assert life.exited("policy_node", 0) == Decision(start=("evaluator",))
    assert life.exited("evaluator", 1) == Decision(failure="sim_bridge exited with -9")


def test_a_service_killed_by_the_stop_signal_is_not_a_failure():
    life = mujoco_check()
    life.exited("sim_bridge", 0)
    assert life.exited("policy_node", -signal.SIGINT) == Decision(start=("evaluator",))


@pytest.mark.parametrize("rc, decision", [(0, Decision(shutdown="policy_node exited")),
                                          (2, Decision(failure="policy_node exited with 2"))])
def test_g1_run_ends_with_its_node(rc, decision):
    assert Lifecycle(G1_RUN.processes({})).exited("policy_node", rc) == decision
