"""Our policy node against Unitree's MuJoCo simulator, emulated by the bridge (`--emulate unitree_mujoco`,
`bcg_sim_bridge/unitree_emulation.py`: crc 0, mode_machine 0, zero LowStates before the first physics
step, zero torque before the first LowCmd, explicit PD from one-step-old sensors), on real loopback
Cyclone DDS. The node is started first, as the README says. Domains 70-72."""
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bcg.transport import TransportConfig, make_transport

_spec = importlib.util.spec_from_file_location("node_processes", Path(__file__).with_name("node_processes.py"))
node_processes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(node_processes)
start, stop = node_processes.start, node_processes.stop

REPO = Path(__file__).resolve().parents[1]
NODE = str(Path(sys.executable).with_name("bcg-policy-node"))
BRIDGE = str(Path(sys.executable).with_name("bcg-sim-bridge"))
NODE_PROFILE = str(REPO / "config" / "policy_node_unitree_mujoco.yaml")
BRIDGE_PROFILE = str(REPO / "config" / "sim_bridge_unitree_mujoco.yaml")
DANCE = REPO / "policies" / "shac_synthetic_dance_k300.onnx"


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
    assert [p["to"] for p in phases][:5] == ["zero_torque", "ramp", "hold", "blend", "policy"], phases
    damping = [p for p in phases if p["to"] == "damping"]
    assert all(p["reason"].startswith(("LowState stale", "stop requested")) for p in damping), damping  # the end
    summary = next(r["summary"] for r in records if "summary" in r)
    assert summary["policy_steps"] >= 500                          # 10 s at 50 Hz
    assert summary["states_dropped"]["not_ready"] >= 80 and summary["states_dropped"]["crc"] == 0
    out = node_out.text()
    assert out.count("LowState dropped: robot not ready") == 1 and "unstable" not in out
    after_ramp = out[out.index("phase zero_torque -> ramp"):]
    assert "robot not ready" not in after_ramp, out     # the drops before it are summarised before it, not later



@pytest.mark.timeout(240)
def test_the_shipped_dance_policy_runs_15_s_after_the_hand_over_with_unitree_s_band_off(tmp_path):
    """Unitree's simulator with its band off, from the model's zero pose: the node ramps and holds with
    the stand gains, blends the dance policy in, and the robot dances 15 s after the hand-over without
    a fall. In lockstep (the emulation's tick counts ms then): the machine's load cannot change it."""
    motion = subprocess.run([sys.executable, "-m", "bcg_train.motion", "node-motion", "synthetic_dance", "--out",
                             str(tmp_path)], capture_output=True, text=True, check=True).stdout.strip()
    events, metrics = tmp_path / "events.jsonl", tmp_path / "metrics.json"
    node, node_out = start(NODE, "--params", NODE_PROFILE, "--domain", "72", "--lockstep", "--policy", str(DANCE),
                           "--motion", motion, "--events", str(events))
    try:
        node_out.wait_for("LowState receiver", 60)
        bridge, bridge_out = start(BRIDGE, "--params", BRIDGE_PROFILE, "--domain", "72", "--lockstep",
                                   "--duration", "19", "--metrics", str(metrics))
        bridge.wait(timeout=200)
        assert stop(bridge, bridge_out) == 0, bridge_out.text()
    finally:
        rc = stop(node, node_out)
    assert rc == 0, node_out.text()
    m = json.loads(metrics.read_text())
    assert m["lockstep"]["ended_at_s"] is None and m["sim_time_s"] == pytest.approx(19.0, abs=0.01)
    records = [json.loads(line) for line in events.read_text().splitlines()]
    phases = [r["transition"] for r in records if "transition" in r]
    assert [p["to"] for p in phases][:5] == ["zero_torque", "ramp", "hold", "blend", "policy"], phases
    blend, handed_over = phases[3]["state_tick_ms"] / 1e3, phases[4]["state_tick_ms"] / 1e3
    assert blend == pytest.approx(2.5, abs=0.2) and 19.0 - handed_over >= 15.0          # ramp, hold, blend
    assert not m["evaluation"]["fell"] and m["evaluation"]["min_root_height_m"] > 0.6, m["evaluation"]
    assert all(p["reason"].startswith("stop requested") for p in phases if p["to"] == "damping"), phases
    summary = next(r["summary"] for r in records if "summary" in r)
    assert summary["policy_steps"] == pytest.approx(50 * (19.0 - blend), abs=3)         # BLEND and POLICY
    assert summary["start_deviation"]["joint_vel_rad_s"] < 0.1
