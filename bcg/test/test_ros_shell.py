"""The ROS 2 side of the nodes, checked without ROS 2: the shared shell's lifecycle (parameters,
spin thread, teardown order, logging) with a stand-in for rclpy's API, the ROS 2 command line's
parameters, and Cyclone's configuration as rmw_cyclonedds_cpp will read it (real Cyclone DDS)."""
import contextlib
import logging
import subprocess
import sys
import textwrap
import threading

import pytest

from bcg.config_check import ConfigError
from bcg.node_log import routed_to_ros
from bcg.ros_node_shell import READ_ONLY_REASON, Spinner, ros_node_session
from bcg.ros_params import ros_argument_parameters
from bcg.transport import TransportConfig
from bcg.transport.cyclone_config import cyclone_config_xml
from bcg.transport.endpoint import EndpointError, NodeStart, resolve_endpoint, ros2_cyclone_uri


class FakeRosLogger:
    """Keeps what is logged; like rclpy's logger, refuses a calling line whose severity changes."""

    def __init__(self):
        self.records, self._line_severity = [], {}

    def _log(self, severity, message):
        caller = sys._getframe(2)
        line = (caller.f_code.co_filename, caller.f_lineno)
        if self._line_severity.setdefault(line, severity) != severity:
            raise ValueError("Logger severity cannot be changed between calls.")
        self.records.append((severity, message))

    def debug(self, m): self._log("DEBUG", m)
    def info(self, m): self._log("INFO", m)
    def warning(self, m): self._log("WARN", m)
    def error(self, m): self._log("ERROR", m)
    def fatal(self, m): self._log("FATAL", m)


class FakeExecutor:
    """spin() blocks until shutdown(), as rclpy's executor does."""

    def __init__(self, events):
        self.events, self.nodes, self._shutdown = events, [], threading.Event()
        self.spin_thread = None

    def add_node(self, node):
        self.nodes.append(node)

    def spin(self):
        self.spin_thread = threading.current_thread()
        self._shutdown.wait()
        self.events.append("spin returned")

    def shutdown(self):
        self.events.append("executor shutdown")
        self._shutdown.set()


class FakeNode:
    def __init__(self, events, executor):
        self.events, self.executor, self.logger = events, executor, FakeRosLogger()

    def get_logger(self):
        return self.logger

    def destroy_node(self):
        alive = self.executor.spin_thread is not None and self.executor.spin_thread.is_alive()
        self.events.append("destroy node" + (" while spinning" if alive else ""))


class FakeRclpyApi:
    """The calls `bcg.ros_node_shell.RclpyApi` makes, recorded."""

    def __init__(self):
        self.events, self.context_args, self.overrides, self.declared = [], None, None, {}
        self.executor_made = FakeExecutor(self.events)

    def open_context(self, args, domain_id):
        self.context_args, self.domain_id = list(args), domain_id
        return "context"

    def create_node(self, name, context, overrides):
        self.node_name, self.overrides = name, dict(overrides)
        self.node = FakeNode(self.events, self.executor_made)
        return self.node

    def declare_read_only(self, node, name, value, description):
        self.declared[name] = (value, description)

    def executor(self, context):
        return self.executor_made

    def close_context(self, context):
        self.events.append("context shut down")


PARAMETERS = {"domain": 181, "writer_hz": 500.0, "interface": "lo", "autostart": True}


def test_the_session_declares_what_the_node_runs_with_read_only():
    api = FakeRclpyApi()
    with ros_node_session(api, node_name="policy_node", program="/ws/lib/bcg_policy_node/policy_node",
                          argv=("--ros-args", "-p", "domain:=181"), domain_id=181, parameters=PARAMETERS):
        pass
    assert api.context_args == ["/ws/lib/bcg_policy_node/policy_node", "--ros-args", "-p", "domain:=181"]
    assert api.domain_id == 181 and api.node_name == "policy_node"
    assert api.overrides == PARAMETERS                     # over whatever the command line said
    assert {k: v for k, (v, _) in api.declared.items()} == PARAMETERS
    assert api.declared["writer_hz"][1] == READ_ONLY_REASON.format(name="writer_hz")
    assert "restart the node" in READ_ONLY_REASON


@pytest.mark.parametrize("fails", [False, True], ids=["clean exit", "exception"])
def test_the_spin_thread_is_joined_before_the_node_is_destroyed(fails):
    api = FakeRclpyApi()
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with ros_node_session(api, node_name="sim_bridge", program="sim_bridge", argv=(), domain_id=1):
            assert api.executor_made.nodes == [api.node]
            if fails:
                raise RuntimeError("the node failed")
    assert api.events == ["executor shutdown", "spin returned", "destroy node", "context shut down"]
    assert not api.executor_made.spin_thread.is_alive()


def test_a_spinner_that_cannot_be_joined_says_so(caplog):
    class Stuck(FakeExecutor):
        def shutdown(self):
            pass                                   # never wakes spin()
    stuck = Stuck([])
    spinner = Spinner(stuck)
    spinner.start()
    assert spinner.stop(timeout_s=0.05) is False
    assert "still running" in caplog.text
    stuck._shutdown.set()


def test_node_logging_goes_to_the_rclpy_logger_only(caplog):
    ros = FakeRosLogger()
    log = logging.getLogger("bcg_test_node")
    with routed_to_ros(["bcg_test_node"], ros):
        for _ in range(2):                       # the same lines again: severities per line unchanged
            log.info("phase %s", "ramp")
            log.warning("damping")
            log.error("refused")
    log.info("after")
    assert ros.records == [("INFO", "phase ramp"), ("WARN", "damping"), ("ERROR", "refused")] * 2
    assert "phase ramp" not in caplog.text and "after" in caplog.text


# -- the ROS 2 command line's parameters -----------------------------------------------------
def test_ros_command_line_parameters_in_rcl_order(tmp_path):
    launch = tmp_path / "launch_params.yaml"
    launch.write_text("/**:\n  ros__parameters:\n    use_sim_time: false\n    domain: 3\n"
                      "renamed:\n  ros__parameters:\n    writer_hz: 250.0\n"
                      "other_node:\n  ros__parameters:\n    domain: 99\n")
    argv = ["--policy", "x.onnx", "--ros-args", "-r", "__node:=renamed", "--params-file", str(launch),
            "-p", "domain:=188", "-p", "other_node:domain:=7", "--param", "interface:=lo",
            "-p", "autostart:=true", "--", "--autostart"]
    assert ros_argument_parameters(argv, "policy_node") == {"domain": 188, "writer_hz": 250.0, "interface": "lo",
                                                            "autostart": True}
    assert ros_argument_parameters(["--domain", "5"], "policy_node") == {}
    with pytest.raises(ConfigError, match=r"^ROS 2 argument `-p domain=5`: 'domain=5': no ':='; expected KEY:=VALUE"):
        ros_argument_parameters(["--ros-args", "-p", "domain=5"], "policy_node")


# -- Cyclone's configuration under ROS 2 -----------------------------------------------------
LOCALHOST_FRAGMENT = ('<CycloneDDS><Domain><General><Interfaces><NetworkInterface address="127.0.0.1"/>'
                      '</Interfaces></General></Domain></CycloneDDS>,')
"""What rmw_cyclonedds_cpp (Humble) puts before $CYCLONEDDS_URI when ROS_LOCALHOST_ONLY=1."""


def cyclone_accepts(config: str, domain: int) -> subprocess.CompletedProcess:
    """Configure `domain` with `config` as rmw_cyclonedds_cpp does (dds_create_domain), in a process of its own."""
    code = textwrap.dedent(f"""
        from cyclonedds.domain import Domain, DomainParticipant
        domain = Domain({domain}, {config!r})
        DomainParticipant({domain})
        print("configured")
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


ROS_START = NodeStart(program="/ws/lib/bcg_sim_bridge/sim_bridge", argv=("--ros-args",), rclpy_available=True)


def ros_endpoint(environ, interface="lo", domain=21):
    start = NodeStart(ROS_START.program, ROS_START.argv, True, environ)
    return resolve_endpoint(start, transport="auto", domain=domain, interface=interface, node_name="sim_bridge",
                            ros_executable="sim_bridge", fallback_domain=1)


def test_ros_localhost_only_is_respected_by_cyclone():
    """ROS_LOCALHOST_ONLY=1: ROS 2 selects loopback itself; naming lo again is what Cyclone refused."""
    endpoint = ros_endpoint({"ROS_LOCALHOST_ONLY": "1"})
    assert "NetworkInterface" not in endpoint.cyclone_uri and "127.0.0.1" in endpoint.cyclone_uri
    assert any("ROS_LOCALHOST_ONLY=1" in n for n in endpoint.notes)
    ok = cyclone_accepts(LOCALHOST_FRAGMENT + endpoint.cyclone_uri, 21)
    assert ok.returncode == 0 and "configured" in ok.stdout, ok.stderr
    naming_lo = cyclone_config_xml(TransportConfig.simulation(21))        # what the node wrote before
    refused = cyclone_accepts(LOCALHOST_FRAGMENT + naming_lo, 21)
    assert refused.returncode != 0 and "selected twice" in refused.stdout + refused.stderr
    with pytest.raises(EndpointError, match="ROS_LOCALHOST_ONLY=1 keeps ROS 2 on loopback"):
        ros_endpoint({"ROS_LOCALHOST_ONLY": "1"}, interface="eth0")


def test_the_cyclone_configuration_is_inline_and_no_file_is_left(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    endpoint = ros_endpoint({})
    assert endpoint.cyclone_uri.startswith("<?xml") and 'NetworkInterface name="lo"' in endpoint.cyclone_uri
    environ = {}
    endpoint.apply_environment(environ)
    assert environ == {"CYCLONEDDS_URI": endpoint.cyclone_uri}
    code = "from cyclonedds.domain import DomainParticipant; DomainParticipant(22); print('configured')"
    env = {"CYCLONEDDS_URI": ros_endpoint({}, domain=22).cyclone_uri, "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0 and "configured" in run.stdout, run.stderr
    bad = cyclone_config_xml(TransportConfig(domain_id=22, interface="nosuchif0"))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**env, "CYCLONEDDS_URI": bad})
    assert run.returncode != 0 and "nosuchif0" in run.stdout + run.stderr   # the inline XML is what Cyclone read
    assert list(tmp_path.iterdir()) == []


def test_the_environment_s_cyclone_setting_is_left_alone():
    uri, note = ros2_cyclone_uri(TransportConfig.simulation(1), {"CYCLONEDDS_URI": "file:///etc/cyclone.xml"})
    assert uri is None and "CYCLONEDDS_URI is set" in note and "'lo' not applied" in note
    uri, note = ros2_cyclone_uri(TransportConfig.simulation(1), {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"})
    assert uri is None and "rmw_cyclonedds_cpp" in note
    assert ros2_cyclone_uri(TransportConfig(domain_id=0), {}) == (
        None, "interface: Cyclone's choice (no interface set)")
