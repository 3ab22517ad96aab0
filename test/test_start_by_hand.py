"""The nodes started by hand, one after the other, as the README shows: the bridge first (it holds the
robot still until the node's first LowCmd), then the node; and the node alone on a domain where
nothing publishes (it says so). Real Cyclone DDS on loopback, domains 73-74."""
import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

from bcg.transport import TransportConfig, make_transport

_spec = importlib.util.spec_from_file_location("node_processes", Path(__file__).with_name("node_processes.py"))
node_processes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(node_processes)
start, stop = node_processes.start, node_processes.stop

NODE = str(Path(sys.executable).with_name("bcg-policy-node"))
BRIDGE = str(Path(sys.executable).with_name("bcg-sim-bridge"))


@pytest.mark.timeout(200)
def test_a_bridge_started_before_the_node_holds_the_robot_until_the_node_drives_it(tmp_path):
    """The bridge by hand, with its defaults (no band), publishes for seconds before the node is up:
    the robot must still be standing when the node's policy starts (it used to fall under zero
    torque long before). Lockstep from the first command on, so the result does not depend on load."""
    metrics, events = tmp_path / "metrics.json", tmp_path / "events.jsonl"
    bridge, bridge_out = start(BRIDGE, "--domain", "73", "--headless", "--lockstep", "--duration", "3.0",
                               "--metrics", str(metrics))
    try:
        with make_transport(TransportConfig.simulation(73, transport="dds")) as transport:
            states = transport.lowstate_reader()
            first = states.wait(100.0)
            assert first is not None, bridge_out.text()
            later = [states.wait(1.0) for _ in range(3)]
        assert all(s is not None and s["tick"] == 0 for s in later)          # held: simulated time at 0
        time.sleep(1.5)              # the node comes up well after the bridge (a node starts in under 1 s)
        node, node_out = start(NODE, "--domain", "73", "--interface", "lo", "--autostart", "--lockstep",
                               "--events", str(events))
        try:
            bridge.wait(timeout=150)
        finally:
            assert stop(node, node_out) == 0, node_out.text()
    finally:
        assert stop(bridge, bridge_out) == 0, bridge_out.text()
    assert "holding the robot still at simulated time 0 until the first valid LowCmd" in bridge_out.text()
    m = json.loads(metrics.read_text())
    assert m["held_before_first_command_s"] > 1.0 and m["elastic_band"] is None
    assert not m["evaluation"]["fell"] and m["evaluation"]["min_root_height_m"] > 0.7, m["evaluation"]
    phases = [json.loads(line)["transition"] for line in events.read_text().splitlines() if "transition" in line]
    blend = next(p for p in phases if p["to"] == "blend")                  # the policy's first step
    assert blend["state_tick_ms"] == pytest.approx(2500, abs=10)
    summary = next(json.loads(line)["summary"] for line in events.read_text().splitlines() if "summary" in line)
    start_state = summary["start_deviation"]
    assert start_state["joint_pos_rad"] < 0.06 and start_state["tilt_deg"] < 4.0, start_state


@pytest.mark.timeout(120)
def test_a_node_that_hears_nothing_says_where_it_listens(tmp_path):
    """With no robot or simulator on its domain the node used to say nothing until it stopped."""
    node, out = start(NODE, "--domain", "74", "--interface", "lo")
    try:
        t_up, _ = out.wait_for("LowState receiver", 90)
        t_said, line = out.wait_for("No LowState in 2 s on domain 74, interface lo", 20)
        assert "is the robot or simulator on this domain?" in line and t_said - t_up < 10.0
        out.wait_for("No LowState in 4 s on domain 74", 20)                 # repeated while nothing arrives
    finally:
        assert stop(node, out) == 0, out.text()
    assert "0 LowStates received" in out.text()
