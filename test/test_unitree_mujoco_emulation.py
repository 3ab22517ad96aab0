"""Our policy node against Unitree's MuJoCo simulator, emulated by the bridge (`--emulate unitree_mujoco`,
`bcg_sim_bridge/unitree_emulation.py`: crc 0, mode_machine 0, zero LowStates before the first physics
step, zero torque before the first LowCmd, explicit PD from one-step-old sensors), on real loopback
Cyclone DDS. The node is started first, as the README says. Domains 70-71."""
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bcg.transport import TransportConfig, make_transport

REPO = Path(__file__).resolve().parents[1]
NODE = str(Path(sys.executable).with_name("bcg-policy-node"))
BRIDGE = str(Path(sys.executable).with_name("bcg-sim-bridge"))
NODE_PROFILE = str(REPO / "config" / "policy_node_unitree_mujoco.yaml")
BRIDGE_PROFILE = str(REPO / "config" / "sim_bridge_unitree_mujoco.yaml")


class Output:
    """A process's output lines, each with the monotonic time it was read."""

    def __init__(self, proc):
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))

    def first(self, text):
        """(time, line) of the first line containing `text`, or None."""
        return next(((t, line) for t, line in self.lines if text in line), None)

    def wait_for(self, text, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            if self.first(text):
                return self.first(text)
            time.sleep(0.02)
        raise AssertionError(f"no line with {text!r} in: " + "\n".join(line for _, line in self.lines))

    def text(self):
        return "\n".join(line for _, line in self.lines)


def start(*cmd):
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, Output(proc)


def stop(proc, out):
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=20)
    out.thread.join(2.0)
    return proc.returncode


@pytest.mark.timeout(90)
def test_with_default_parameters_the_node_says_within_1_s_why_it_drops_every_state(tmp_path):
    node, node_out = start(NODE, "--domain", "70", "--interface", "lo", "--autostart")
    bridge = None
    try:
        node_out.wait_for("LowState receiver", 60)
        with make_transport(TransportConfig.simulation(70, transport="dds")) as transport:
            states = transport.lowstate_reader(check_crc=False)
            bridge, bridge_out = start(BRIDGE, "--params", BRIDGE_PROFILE, "--domain", "70")
            first = states.wait(60.0)
            t_first = time.monotonic()
            assert first is not None and first["crc"] == 0, "no LowState from the emulated simulator"
            t_log, line = node_out.wait_for("LowState dropped: CRC mismatch", 10)
        assert t_log - t_first < 1.0, line
        assert "set check_state_crc: false, or --no-state-crc" in line
        time.sleep(0.5)
        assert "phase" not in node_out.text()                    # nothing commanded: every state dropped
    finally:
        if bridge is not None:
            stop(bridge, bridge_out)
        assert stop(node, node_out) == 0, node_out.text()
    assert "dropped: " in node_out.text() and "(crc " in node_out.text()   # in the stop summary


@pytest.mark.timeout(150)
def test_our_node_with_the_profile_stands_the_robot_in_unitree_s_simulator(tmp_path):
    """Ramp from the zero pose, hold, the built-in stand policy for over 10 s of simulated time:
    the robot stays up, no safety event, every LowCmd applied."""
    events, metrics = tmp_path / "events.jsonl", tmp_path / "metrics.json"
    node, node_out = start(NODE, "--params", NODE_PROFILE, "--domain", "71", "--events", str(events))
    try:
        node_out.wait_for("LowState receiver", 60)
        bridge, bridge_out = start(BRIDGE, "--params", BRIDGE_PROFILE, "--domain", "71", "--duration", "13.5",
                                   "--metrics", str(metrics))
        bridge.wait(timeout=100)                                   # 13.5 s simulated, paced at real time
        assert stop(bridge, bridge_out) == 0, bridge_out.text()
    finally:
        rc = stop(node, node_out)
    assert rc == 0, node_out.text()
    m = json.loads(metrics.read_text())
    assert m["emulate"] == "unitree_mujoco" and m["sim_time_s"] == pytest.approx(13.5, abs=0.01)
    assert not m["evaluation"]["fell"] and m["evaluation"]["min_root_height_m"] > 0.7, m["evaluation"]
    assert m["commands"]["accepted"] > 5000 and m["commands"]["rejected_total"] == 0
    records = [json.loads(line) for line in events.read_text().splitlines()]
    phases = [r["transition"] for r in records if "transition" in r]
    assert [p["to"] for p in phases][:4] == ["zero_torque", "ramp", "hold", "policy"], phases
    damping = [p for p in phases if p["to"] == "damping"]
    assert all(p["reason"].startswith(("LowState stale", "stop requested")) for p in damping), damping  # the end
    summary = next(r["summary"] for r in records if "summary" in r)
    assert summary["policy_steps"] >= 500                          # 10 s at 50 Hz
    assert summary["states_dropped"]["not_ready"] >= 80 and summary["states_dropped"]["crc"] == 0
    out = node_out.text()
    assert out.count("LowState dropped: robot not ready") == 1 and "unstable" not in out
