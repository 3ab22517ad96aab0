"""Which transport, domain and interface each node resolves for every way of starting it.

The command lines are those the launchers build from the one launch graph: `bcg launch` runs the
console command with the graph's arguments; `ros2 launch` runs the package's ROS 2 executable with
the same arguments followed by launch_ros's `--ros-args -r __node:=NAME --params-file FILE`;
`ros2 run` runs the ROS 2 executable with whatever the user adds. No rclpy is needed: whether it
could be imported is one of the facts (`NodeStart`) the rule decides from.
"""
import dataclasses
from pathlib import Path

import pytest

import bcg_policy_node.entry.main as policy_node
import bcg_sim_bridge.main as sim_bridge
from bcg.config_check import ConfigError
from bcg.launch_graph import G1_RUN, MUJOCO_CHECK
from bcg.transport.endpoint import EndpointError, NodeStart

REPO = Path(__file__).resolve().parents[1]
NODES = {"policy_node": policy_node, "sim_bridge": sim_bridge}


def launched(graph, name, ros: bool, environ=None, **given):
    """The NodeStart of process `name` of `graph` as `bcg launch` (ros False) or `ros2 launch` starts it."""
    spec = next(p for p in graph.processes(given) if p.name == name)
    if not ros:
        return NodeStart(program=f"/venv/bin/{spec.console}", argv=spec.arguments, rclpy_available=False)
    ros_args = ("--ros-args", "-r", f"__node:={spec.name}", *[a for f in spec.parameters for a in ("--params-file", f)])
    return NodeStart(program=f"/ws/install/{spec.package}/lib/{spec.package}/{spec.executable}",
                     argv=spec.arguments + ros_args, rclpy_available=True, environ=environ or {})


def ros_run(node: str, *argv, environ=None, rclpy=True):
    pkg = {"policy_node": "bcg_policy_node", "sim_bridge": "bcg_sim_bridge"}[node]
    return NodeStart(program=f"/ws/install/{pkg}/lib/{pkg}/{node}", argv=argv, rclpy_available=rclpy,
                     environ=environ or {})


def resolved(node: str, start: NodeStart):
    config, endpoint = NODES[node].settings(start)
    t = endpoint.transport
    assert (config.transport, config.domain) == (t.transport, t.domain_id)     # what it reports is what it does
    return endpoint.ros, t.transport, t.domain_id, t.interface


@pytest.mark.parametrize("node", ["sim_bridge", "policy_node"])
def test_mujoco_check_under_both_launchers(node):
    """Under ros2 launch the bridge got transport 'dds' from sim_bridge.yaml beside its
    rclpy context on the same domain, which Cyclone refuses; it must be 'ros2' there."""
    assert resolved(node, launched(MUJOCO_CHECK, node, ros=False, domain_id="180")) == (False, "dds", 180, "lo")
    assert resolved(node, launched(MUJOCO_CHECK, node, ros=True, domain_id="180")) == (True, "ros2", 180, "lo")


def test_mujoco_check_runs_the_same_lockstep_and_simulated_clock_under_both_launchers():
    """Under ros2 launch both nodes run in lockstep as under bcg launch (the same settings but the
    transport), and the bridge's motion start and band release fall on the node's policy start in
    simulated time: the node's ramp + hold, never a wall-clock guess."""
    configs = {}
    for ros in (False, True):
        for node in ("sim_bridge", "policy_node"):
            start = launched(MUJOCO_CHECK, node, ros=ros, domain_id="180", elastic_band="true")
            config, _ = NODES[node].settings(start)
            configs[node, ros] = dataclasses.asdict(config)
    for node in ("sim_bridge", "policy_node"):
        assert configs[node, True]["lockstep"] and configs[node, False]["lockstep"]
        assert {**configs[node, True], "transport": None} == {**configs[node, False], "transport": None}
    bridge, policy = configs["sim_bridge", True], configs["policy_node", True]
    start = policy["ramp_duration"] + policy["autostart_hold"]
    assert bridge["motion_start"] == bridge["band_release_time"] == pytest.approx(start) and start > 0


def test_g1_run_under_both_launchers():
    for ros in (False, True):
        start = launched(G1_RUN, "policy_node", ros=ros, environ={"ROS_DOMAIN_ID": "9"}, network_interface="eth0")
        assert resolved("policy_node", start) == (ros, "ros2" if ros else "dds", 0, "eth0")   # the robot's domain


def test_ros_run_takes_the_domain_the_ros_way():
    """`-p domain:=N` and ROS_DOMAIN_ID choose the domain of a ROS 2 node."""
    params = str(REPO / "config" / "sim_bridge.yaml")
    assert resolved("sim_bridge", ros_run("sim_bridge", "--ros-args", "--params-file", params,
                                          environ={"ROS_DOMAIN_ID": "7"})) == (True, "ros2", 7, "lo")
    assert resolved("sim_bridge", ros_run("sim_bridge", "--ros-args", "--params-file", params, "-p", "domain:=188",
                                          environ={"ROS_DOMAIN_ID": "7"})) == (True, "ros2", 188, "lo")
    assert resolved("policy_node", ros_run("policy_node", "--domain", "181",
                                           environ={"ROS_DOMAIN_ID": "7"})) == (True, "ros2", 181, None)
    assert resolved("policy_node", ros_run("policy_node")) == (True, "ros2", 0, None)
    with pytest.raises(EndpointError, match="ROS_DOMAIN_ID='x'"):
        policy_node.settings(ros_run("policy_node", environ={"ROS_DOMAIN_ID": "x"}))


def test_without_ros_the_environment_s_ros_domain_is_not_used():
    start = NodeStart(program="/venv/bin/bcg-sim-bridge", argv=(), rclpy_available=True,
                      environ={"ROS_DOMAIN_ID": "7"})
    assert resolved("sim_bridge", start) == (False, "dds", 1, "lo")
    start = NodeStart(program="/venv/bin/bcg-policy-node", argv=(), rclpy_available=True,
                      environ={"ROS_DOMAIN_ID": "7"})
    assert resolved("policy_node", start) == (False, "dds", 0, None)


def test_contradictions_are_refused_by_name():
    with pytest.raises(EndpointError, match="transport 'dds' in a ROS 2 node"):
        sim_bridge.settings(ros_run("sim_bridge", "--transport", "dds"))
    with pytest.raises(EndpointError, match="rclpy cannot be imported"):
        policy_node.settings(ros_run("policy_node", "--ros-args", "-p", "domain:=3", rclpy=False))
    with pytest.raises(ConfigError, match=r"^policy_node\.domian=3: unknown key; expected one of policy, "):
        policy_node.settings(ros_run("policy_node", "--ros-args", "-p", "domian:=3"))


def test_ros_parameters_are_applied_not_just_shown():
    """A parameter given on the ROS 2 command line is what the node runs with (it used to
    be declared from the YAML and ignored); flags of the launch graph still win over it."""
    params = str(REPO / "config" / "policy_node.yaml")
    config, _ = policy_node.settings(ros_run("policy_node", "--params", params, "--domain", "181", "--ros-args",
                                             "-p", "writer_hz:=100.0", "-p", "domain:=5"))
    assert (config.writer_hz, config.domain, config.transport) == (100.0, 181, "ros2")


def test_the_ros_executables_are_those_the_packages_install():
    """Started as its ROS 2 executable, a node is a ROS 2 node: the name must be the installed one."""
    from bcg_policy_node.config import ROS_EXECUTABLE as POLICY_NODE_EXE
    from bcg_sim_bridge.config import ROS_EXECUTABLE as BRIDGE_EXE
    for package, exe in (("bcg_policy_node", POLICY_NODE_EXE), ("bcg_sim_bridge", BRIDGE_EXE)):
        entry = "entry.main" if package == "bcg_policy_node" else "main"
        assert f'"{exe} = {package}.{entry}:main"' in (REPO / package / "setup.py").read_text()
