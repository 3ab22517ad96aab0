"""The policy node as a process on real loopback Cyclone DDS, fed by a test client.

Each bad input reaches the node on the wire; the node's reaction is checked on the wire (damping:
kp = 0, kd = damping gain, no NaN) and in its log (the reason). A bad policy is refused with a
non-zero exit and nothing published.
"""
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from bcg.contract import mlp_model, stand_contract, write_policy
from bcg.robot import RobotDescription
from bcg.transport import TransportConfig, make_transport

NODE = str(Path(sys.executable).with_name("bcg-policy-node"))
PARAMS = """policy_node:
  ros__parameters:
    ramp_duration: 0.2
    autostart_hold: 0.1
    blend_duration: 0.1
    shutdown_damping: 0.3
    stale_limit: {stale_limit}
"""
ROBOT_STALE_LIMIT_S = 0.06
LOADED_MACHINE_STALE_LIMIT_S = 1.0
"""The LowState staleness limit of the bad-input cases and the signal test: a loaded machine may delay
the publisher's LowStates well past the robot's 60 ms, and that must not pre-empt the bad input or
the signal a test sends. The `stale` case pauses the publisher against a limit of 0.2 s until the node damps."""


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


PUBLISHER = Path(__file__).with_name("lowstate_publisher.py")
_spec = importlib.util.spec_from_file_location("lowstate_publisher", PUBLISHER)
lowstate_publisher = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lowstate_publisher)


class StateClient:
    """Publishes a LowState at 500 Hz from a process of its own (`lowstate_publisher.py`;
    `self.state`, editable in place; `paused` stops it) and keeps every LowCmd."""

    def __init__(self, domain, robot, folder):
        self.transport = make_transport(TransportConfig.simulation(domain_id=domain, transport="dds"))
        self.reader = self.transport.lowcmd_reader(check_crc=True)
        path = folder / f"lowstate_{domain}.bin"
        self.shared = np.memmap(path, dtype=lowstate_publisher.lowstate_layout(), mode="w+", shape=(1,))
        s = self.state = self.shared["state"][0]
        s["mode_machine"] = 5
        s["imu_state"]["quaternion"] = [1, 0, 0, 0]
        s["motor_state"]["q"][robot.motor_slots] = robot.default_q
        s["motor_state"]["temperature"] = 40
        self.shared.flush()
        self.publisher = subprocess.Popen([sys.executable, str(PUBLISHER), str(domain), str(path)])
        self.done, self.commands = threading.Event(), []
        self.collector = threading.Thread(target=self._collect, daemon=True)
        self.collector.start()

    @property
    def paused(self) -> bool:
        return bool(self.shared["paused"][0])

    @paused.setter
    def paused(self, value: bool) -> None:
        self.shared["paused"][0] = value

    def _collect(self):
        while not self.done.is_set():
            cmd = self.reader.wait(0.05)
            if cmd is not None:
                self.commands.append((time.monotonic(), cmd))

    def since(self, t0):
        return [c for t, c in self.commands if t >= t0]

    def wait_for(self, predicate, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(predicate(c) for c in self.since(end - timeout)):
                return True
            time.sleep(0.02)
        return False

    def close(self):
        self.done.set()
        self.publisher.terminate()
        self.publisher.wait(5.0)
        self.collector.join(1.0)
        self.transport.close()


STARTED = []
"""The node processes this module started (each the leader of its own process group)."""


@pytest.fixture(autouse=True)
def no_node_outlives_its_test():
    """A test that fails before it stops its node must not leave the node and its writer publishing on
    their domain for the tests after it: every process group still alive at the end is killed."""
    yield
    while STARTED:
        proc = STARTED.pop()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def start_node(tmp_path, domain, *extra, stale_limit=ROBOT_STALE_LIMIT_S):
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS.format(stale_limit=stale_limit))
    proc = subprocess.Popen([NODE, "--params", str(params), "--domain", str(domain), "--interface", "lo",
                             "--autostart", *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    STARTED.append(proc)
    return proc


def stop_node(proc):
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=10)
    return proc.returncode, out


def is_damping(cmd, kd):
    m = cmd["motor_cmd"]
    return (not m["kp"].any()) and np.allclose(m["kd"][:29], kd) and np.isfinite(m["q"]).all()


def is_pd(cmd):
    return cmd["motor_cmd"]["kp"][:29].min() > 0


def reach_policy(client) -> float:
    """Wait for the node's PD commands (ramp), then past the ramp (0.2 s), hold (0.1 s) and blend
    (0.1 s) into POLICY; returns the time."""
    assert client.wait_for(is_pd, 20), "the node never reached ramp/hold"
    time.sleep(0.5)
    return time.monotonic()


def damped_from(client, t0, kd) -> list:
    """The (time, LowCmd)s from the first damping command after `t0` on, each checked to be damping
    (latched). When the first one came is not asserted: on a loaded machine a few commands of the
    phase before may still arrive after `t0` (a timing claim, not the behaviour under test)."""
    after = [(t, c) for t, c in client.commands if t >= t0]
    first = next((i for i, (_, c) in enumerate(after) if is_damping(c, kd)), None)
    assert first is not None, "no damping after the event"
    assert all(is_damping(c, kd) for _, c in after[first:]), "damping did not stay"
    return after[first:]


def set_gyro_nan(s): s["imu_state"]["gyroscope"][0] = np.nan
def set_dq(s): s["motor_state"]["dq"][3] = 40.0
def set_upside_down(s): s["imu_state"]["quaternion"] = [0, 1, 0, 0]
def set_hot(s): s["motor_state"]["temperature"][5] = [95, 95]
def set_fault(s): s["motor_state"]["motorstate"][7] = 0x4


CASES = {
    "stale": (None, "LowState stale"),
    "nan_state": (set_gyro_nan, "non-finite IMU gyroscope"),
    "joint_velocity": (set_dq, "|dq| = 40.0 rad/s on left_knee_joint"),
    "upside_down": (set_upside_down, "base upside down"),
    "temperature": (set_hot, "motor temperature 95 C"),
    "motor_fault": (set_fault, "motor fault bits"),
    "nan_policy_output": ("nan_policy", "non-finite policy output"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_on_the_wire_leads_to_damping(robot, tmp_path, case):
    domain = 60 + list(CASES).index(case)
    corrupt, reason = CASES[case]
    extra = []
    if corrupt == "nan_policy":
        contract = stand_contract(robot)
        n = contract.observation.size
        path = write_policy(tmp_path / "nan.onnx", mlp_model([(np.zeros((n, 29)), np.full(29, np.nan))]), contract)
        extra = ["--policy", str(path)]
    client = StateClient(domain, robot, tmp_path)
    proc = start_node(tmp_path, domain, *extra, stale_limit=0.2 if corrupt is None else LOADED_MACHINE_STALE_LIMIT_S)
    try:
        if corrupt == "nan_policy":
            assert client.wait_for(lambda c: is_damping(c, robot.damping_kd), 20), "never damped"
        else:
            t_bad = reach_policy(client)
            if corrupt is None:
                client.paused = True
            else:
                corrupt(client.state)
            # that it damps and stays damped, not how soon (a timing claim a loaded machine would fail)
            assert client.wait_for(lambda c: is_damping(c, robot.damping_kd), 20), "never damped"
            client.paused = False
            time.sleep(0.3)
            damped_from(client, t_bad, robot.damping_kd)
        assert all(np.isfinite(c["motor_cmd"]["q"]).all() and np.isfinite(c["motor_cmd"]["kd"]).all()
                   for _, c in client.commands)
        assert all(c["mode_machine"] == 5 for _, c in client.commands)
    finally:
        rc, out = stop_node(proc)
        client.close()
    assert rc == 0, out
    assert "-> damping: " + reason in out, out


@pytest.mark.timeout(60)
def test_bad_policy_is_refused_and_nothing_is_published(robot, tmp_path):
    bad = tmp_path / "corrupt.onnx"
    bad.write_bytes(os.urandom(256))
    client = StateClient(67, robot, tmp_path)
    try:
        proc = start_node(tmp_path, 67, "--policy", str(bad))
        out, _ = proc.communicate(timeout=30)
        time.sleep(0.2)
    finally:
        client.close()
    assert proc.returncode == 2
    assert f"refusing to start: policy file {bad}: not a valid ONNX model" in out
    assert client.commands == []


@pytest.mark.timeout(60)
def test_a_frozen_policy_process_is_damped_by_its_writer(robot, tmp_path):
    """SIGSTOP freezes the policy process in POLICY (receiver, policy, all its threads): its LowCmd
    writer process keeps writing and, once the newest LowState it was told of is stale, damps."""
    client = StateClient(59, robot, tmp_path)
    proc = start_node(tmp_path, 59)
    try:
        reach_policy(client)
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            assert client.wait_for(lambda c: is_damping(c, robot.damping_kd), 10), "the writer never damped"
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.3)
        assert all(is_damping(c, robot.damping_kd) for c in client.since(time.monotonic() - 0.1))  # latched
    finally:
        rc, out = stop_node(proc)
        client.close()
    assert rc == 0, out
    assert "-> damping: LowState stale" in out, out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signals", [(signal.SIGINT,), (signal.SIGINT, signal.SIGTERM)],
                         ids=["sigint", "sigint+sigterm"])
def test_sigint_publishes_damping_for_the_shutdown_time_then_exits(robot, tmp_path, signals):
    """shutdown_damping is 0.3 s in PARAMS: after SIGINT only damping goes out, for that long. A
    second signal at once (an impatient Ctrl-C, a supervisor) changes nothing: one stop, exit 0.
    Which of two signals sent at once the node sees first is the kernel's choice (it may hand them
    to different threads), so then the one stop may name either."""
    domain = 58 if len(signals) == 1 else 55
    client = StateClient(domain, robot, tmp_path)
    proc = start_node(tmp_path, domain, stale_limit=LOADED_MACHINE_STALE_LIMIT_S)   # the stop, not staleness
    try:
        t_int = reach_policy(client)
        for sig in signals:
            proc.send_signal(sig)
        out, _ = proc.communicate(timeout=10)
        time.sleep(0.1)
    finally:
        client.close()
    assert proc.returncode == 0, out
    damped = damped_from(client, t_int, robot.damping_kd)
    assert damped[-1][0] - damped[0][0] >= 0.25              # damping for the whole 0.3 s
    stops = re.findall(r"-> damping: stop requested \((\w+)\)", out)
    assert len(stops) == 1 and stops[0] in [s.name for s in signals], out


@pytest.mark.timeout(60)
def test_a_killed_policy_process_leaves_damping_for_the_shutdown_time(robot, tmp_path):
    """SIGKILL (a crash: no handler runs) in POLICY: the orphaned writer process notices, publishes
    damping for shutdown_damping (0.3 s in PARAMS), then ends by itself."""
    client = StateClient(57, robot, tmp_path)
    proc = start_node(tmp_path, 57)
    try:
        t_kill = reach_policy(client)
        proc.kill()
        proc.communicate(timeout=10)
        time.sleep(1.5)
    finally:
        client.close()
    # the writer is re-parented, and sees it, only once the kernel has torn the killed process down:
    # 40-60 ms measured with the machine busy (its LowState staleness limit, 60 ms, bounds it too)
    damped = damped_from(client, t_kill, robot.damping_kd)
    assert damped[-1][0] - damped[0][0] >= 0.25              # damping went on after the crash
    assert client.commands[-1][0] < time.monotonic() - 0.5    # and the writer ended by itself


def writer_process(pid: int) -> int:
    """The node's LowCmd writer: its child started by multiprocessing's spawn."""
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    raise AssertionError(f"no LowCmd writer process under {pid}")


@pytest.mark.timeout(60)
def test_a_killed_writer_process_is_replaced_by_damping_from_the_policy_process(robot, tmp_path):
    """SIGKILL on the LowCmd writer in POLICY: the policy process damps in its place through its
    standby writer for shutdown_damping (0.3 s in PARAMS), then exits 1 naming the failure, and no LowCmd
    follows."""
    client = StateClient(56, robot, tmp_path)
    proc = start_node(tmp_path, 56)
    try:
        t_kill = reach_policy(client)
        writer = writer_process(proc.pid)
        libraries = Path(f"/proc/{writer}/maps").read_text()
        assert "mujoco" not in libraries and "onnxruntime" not in libraries      # the 500 Hz writer stays light
        assert "glfw" not in Path(f"/proc/{proc.pid}/maps").read_text()        # the node renders nothing
        os.kill(writer, signal.SIGKILL)
        out, _ = proc.communicate(timeout=20)
        time.sleep(0.3)                                       # what was in flight has arrived
        sent = len(client.commands)
        time.sleep(0.7)
    finally:
        client.close()
    assert len(client.commands) == sent                       # the node is gone: nothing more on the wire
    assert proc.returncode == 1, out
    assert "LowCmd writer process ended with exit code -9" in out and "-> damping: LowCmd writer process died" in out
    damped = damped_from(client, t_kill, robot.damping_kd)      # its pipe closes once it is torn down
    assert damped[-1][0] - damped[0][0] >= 0.25              # damped for the shutdown time
