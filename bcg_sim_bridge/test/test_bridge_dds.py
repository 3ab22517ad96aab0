"""The bridge as a separate process on real Cyclone DDS over loopback, talked to like the robot.

Each test has its own DDS domain (30-49 belong to these tests). The bridge holds simulated time
at 0 until the test's first LowCmd arrives (--wait-for-command), so DDS discovery time does not
matter; everything is judged by simulated time (LowState.tick), never by the wall clock.
"""
import contextlib
import json
import signal
import subprocess
import sys
from typing import List

import numpy as np
import pytest
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.topic import Topic

from bcg.robot import RobotDescription
from bcg.transport import TransportConfig, make_transport
from bcg.transport.dds import WRITER_QOS
from bcg.wire import LOWCMD, LOWCMD_TOPIC, LowCmd_, crc_ok, encode_lowcmd, new_lowcmd

pytestmark = pytest.mark.timeout(120)
START_TIMEOUT_S = 60.0
"""Wall seconds allowed for the bridge process to import, load the model and be discovered."""


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


@contextlib.contextmanager
def bridge_process(domain: int, metrics, *flags: str, fast: bool = True):
    """The bridge in a child process on `domain`; killed on the way out if still running."""
    cmd = [sys.executable, "-m", "bcg_sim_bridge.main", "--headless", "--domain", str(domain),
           "--interface", "lo", "--metrics", str(metrics), "--wait-for-command", str(START_TIMEOUT_S), *flags]
    proc = subprocess.Popen(cmd + (["--fast"] if fast else []), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def finish(proc: subprocess.Popen, terminate: bool = False) -> str:
    """Wait for the bridge (after SIGTERM when asked); return its output; the exit status must be 0."""
    if terminate:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return out


def start_running(states, commands, rec: np.void) -> np.void:
    """Send `rec` until the bridge's simulated time moves (it holds time at 0 until a LowCmd
    arrives, and the first samples of a new writer may precede discovery); the newest LowState."""
    for _ in range(int(START_TIMEOUT_S / 0.05)):
        commands.write(rec)
        state = states.wait(0.05)
        if state is not None and state["tick"] > 0:
            return state
    raise AssertionError("the bridge never started simulating")


def wait_for_tick(states, tick: int) -> int:
    """Read LowStates until one at simulated tick >= `tick` (ms) arrives; its tick."""
    for _ in range(int(START_TIMEOUT_S / 0.2)):
        state = states.wait(0.2)
        if state is not None and int(state["tick"]) >= tick:
            return int(state["tick"])
    raise AssertionError(f"the bridge never reached tick {tick}")


def running_under_damping(robot, transport, check_crc: bool):
    """(LowState reader, LowCmd writer, damping LowCmd with kd = 1, newest LowState) once the bridge
    simulates under that damping command."""
    states = transport.lowstate_reader(check_crc=check_crc)
    commands = transport.lowcmd_writer()
    state = states.wait(START_TIMEOUT_S)
    assert state is not None, "no LowState from the bridge"
    damping = lowcmd(robot, int(state["mode_machine"]), kd=1.0)
    return states, commands, damping, start_running(states, commands, damping)


def lowcmd(robot, mode_machine: int, tau: float = 0.0, kd: float = 0.0) -> np.void:
    rec = new_lowcmd()
    rec["mode_machine"] = mode_machine
    m = rec["motor_cmd"]
    m["mode"][robot.motor_slots] = 1
    m["tau"][robot.motor_slots] = tau
    m["kd"][robot.motor_slots] = kd
    return rec


def test_damping_commands_damp_the_joints(robot, tmp_path):
    """Hanging in the elastic band: a torque kick, then zero torque, leaves the joints swinging;
    damping commands (kd = 4) stop them.

    The bridge's own fallback is zero torque here (--damping-kd 0), so the damping seen is ours.
    """
    metrics = tmp_path / "metrics.json"
    t, speed = [], []
    with bridge_process(30, metrics, "--duration", "4", "--elastic-band", "--band-mode", "hang", "--damping-kd", "0",
                        "--command-timeout", "0.5") as proc, \
            make_transport(TransportConfig.simulation(30, transport="dds")) as transport:
        states = transport.lowstate_reader(check_crc=True)
        commands = transport.lowcmd_writer()
        state = states.wait(START_TIMEOUT_S)
        assert state is not None, "no LowState from the bridge"
        while proc.poll() is None:
            state = states.wait(0.2)
            if state is None:
                continue
            now = state["tick"] / 1000.0
            kick = 5.0 if 1.0 <= now < 1.1 else 0.0
            commands.write(lowcmd(robot, int(state["mode_machine"]), tau=kick, kd=0.0 if now < 2.0 else 4.0))
            t.append(now)
            speed.append(np.sqrt(np.mean(state["motor_state"]["dq"][robot.motor_slots] ** 2)))
        finish(proc)
    t, speed = np.array(t), np.array(speed)
    swinging = speed[(t > 1.5) & (t < 2.0)]
    damped = speed[t > 3.5]
    assert len(swinging) and len(damped)
    assert swinging.mean() > 0.5, "zero torque should leave the hanging joints swinging"
    assert damped.mean() < 0.1 * swinging.mean()
    report = json.loads(metrics.read_text())
    assert report["commands"]["accepted"] > 0 and report["commands"]["rejected_total"] == 0
    assert report["evaluation"]["fell"] is False


def test_bad_commands_are_rejected_counted_and_never_applied(robot, tmp_path):
    """Bad CRC, NaN and wrong mode_machine commands carry tau = 10 N m; the torque stays 0."""
    metrics = tmp_path / "metrics.json"
    bad_taus: List[float] = []
    good_taus: List[float] = []
    with bridge_process(31, metrics, "--duration", "30", "--damping-kd", "0", "--elastic-band", "--band-mode",
                        "hang") as proc, \
            make_transport(TransportConfig.simulation(31, transport="dds")) as transport:
        participant = DomainParticipant(31)  # a plain IdlStruct writer, to send a CRC the codec would fix
        raw = DataWriter(participant, Topic(participant, LOWCMD_TOPIC, LowCmd_), WRITER_QOS)
        states = transport.lowstate_reader(check_crc=True)
        commands = transport.lowcmd_writer()
        state = states.wait(START_TIMEOUT_S)
        assert state is not None, "no LowState from the bridge"
        mode_machine = int(state["mode_machine"])
        start_running(states, commands, lowcmd(robot, mode_machine))  # zero torque: tau_est stays 0

        def watch(n: int, into: List[float]) -> None:
            for _ in range(n):
                s = states.wait(5.0)
                assert s is not None, "the bridge stopped publishing"
                into.append(float(np.abs(s["motor_state"]["tau_est"]).max()))

        for _ in range(5):
            rec = lowcmd(robot, mode_machine, tau=10.0)
            encode_lowcmd(rec)
            msg = LOWCMD.to_idl(rec)
            msg.crc ^= 0xDEADBEEF
            raw.write(msg)
            watch(5, bad_taus)
            rec = lowcmd(robot, mode_machine, tau=10.0)
            rec["motor_cmd"]["q"][robot.motor_slots[0]] = np.nan
            commands.write(rec)
            watch(5, bad_taus)
            commands.write(lowcmd(robot, mode_machine + 1, tau=10.0))
            watch(5, bad_taus)
        for _ in range(20):  # control: the same torque in a valid command shows in tau_est
            commands.write(lowcmd(robot, mode_machine, tau=10.0))
            watch(1, good_taus)
        finish(proc, terminate=True)
    assert max(bad_taus) == 0.0
    assert max(good_taus) == pytest.approx(10.0)
    report = json.loads(metrics.read_text())
    c = report["commands"]
    assert all(c["rejected"][reason] >= 1 for reason in ("crc", "non_finite", "mode_machine")), c
    assert c["rejected_total"] <= 15 and c["accepted"] >= 2
    assert c["rejected_total"] + c["accepted"] == c["received"]
    assert 0 < report["sim_time_s"] < 30.0


def test_states_have_valid_crc_and_ticks_2ms_apart(robot, tmp_path):
    """Paced at real time for 1 s of simulated time under damping commands."""
    metrics = tmp_path / "metrics.json"
    ticks, crcs = [], []
    with bridge_process(32, metrics, "--duration", "1", fast=False) as proc, \
            make_transport(TransportConfig.simulation(32, transport="dds")) as transport:
        states, commands, damping, state = running_under_damping(robot, transport, check_crc=False)
        while state is not None or proc.poll() is None:
            if state is not None:
                ticks.append(int(state["tick"]))
                crcs.append(crc_ok(state))
                assert state["mode_machine"] == robot.mode_machine
                commands.write(damping)
            state = states.wait(0.2)
        finish(proc)
    assert all(crcs) and len(crcs) > 100
    gaps = np.diff(ticks)
    assert np.all(gaps > 0) and np.all(gaps % 2 == 0) and gaps.min() == 2
    report = json.loads(metrics.read_text())
    assert report["sim_time_s"] == pytest.approx(1.0) and report["physics_steps"] == 1000
    assert report["commands"]["accepted"] >= 1 and report["commands"]["rejected_total"] == 0


def test_every_command_sent_is_validated_and_counted(robot, tmp_path):
    """Paced at real time, the physics takes commands in 2-step bursts; bursts of 5 LowCmds
    arriving between two of them are each validated and counted, not only the newest."""
    metrics = tmp_path / "metrics.json"
    with bridge_process(34, metrics, "--duration", "30", fast=False) as proc, \
            make_transport(TransportConfig.simulation(34, transport="dds")) as transport:
        states, commands, damping, _ = running_under_damping(robot, transport, check_crc=True)
        tick = 0
        for _ in range(60):
            for _ in range(5):
                commands.write(damping)
            tick = wait_for_tick(states, tick + 2)   # the bridge steps in between
        wait_for_tick(states, tick + 20)             # ... and past the last burst before it stops
        finish(proc, terminate=True)
    c = json.loads(metrics.read_text())["commands"]
    assert c["accepted"] >= 300 and c["rejected_total"] == 0 and c["accepted"] == c["received"]
