"""The simulator killed in the middle of a lockstep check: the node damps (and keeps publishing damping)
once LowState has been silent for `LOCKSTEP_SILENCE_S` wall seconds, and the evaluator's verdict says
the simulator stopped, not that the policy fell. Real processes, real Cyclone DDS on loopback
(domain 76); lockstep, so the phases do not depend on the machine's load."""
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bcg.launch_graph.verdict import run as run_verdict
from bcg.transport import TransportConfig, make_transport
from bcg_policy_node.realtime.runtime import LOCKSTEP_SILENCE_S

_spec = importlib.util.spec_from_file_location("node_processes", Path(__file__).with_name("node_processes.py"))
node_processes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(node_processes)
start, stop = node_processes.start, node_processes.stop

NODE = str(Path(sys.executable).with_name("bcg-policy-node"))
BRIDGE = str(Path(sys.executable).with_name("bcg-sim-bridge"))
DOMAIN = "76"


@pytest.mark.timeout(300)
def test_a_killed_simulator_leaves_the_node_damping_and_the_verdict_says_the_simulator_stopped(tmp_path):
    metrics, events, verdict = tmp_path / "v.metrics.json", tmp_path / "v.events.jsonl", tmp_path / "v.json"
    bridge, bridge_out = start(BRIDGE, "--domain", DOMAIN, "--interface", "lo", "--headless", "--lockstep",
                               "--duration", "60", "--metrics", str(metrics))
    node, node_out = start(NODE, "--domain", DOMAIN, "--interface", "lo", "--autostart", "--lockstep",
                           "--events", str(events))
    try:
        with make_transport(TransportConfig.simulation(int(DOMAIN), transport="dds")) as transport:
            commands = transport.lowcmd_reader(check_crc=False, depth=64)
            node_out.wait_for("-> ramp", 200)
            bridge.kill()
            bridge.wait(timeout=20)
            t_kill = time.monotonic()
            t_said, line = node_out.wait_for("did the simulator stop?", LOCKSTEP_SILENCE_S + 60)
            time.sleep(0.2)
            commands.take_all()                                   # what was sent before the damping
            time.sleep(0.5)
            after = commands.take_all()
    finally:
        node_rc = stop(node, node_out)
        stop(bridge, bridge_out)
    assert t_said - t_kill > LOCKSTEP_SILENCE_S - 1.0, node_out.text()      # a slow simulator is waited for
    assert "-> damping: LowState stale: none for" in node_out.text(), node_out.text()
    assert node_rc == 0, node_out.text()
    assert len(after) > 10, "damping is published continuously, off lockstep"
    motors = np.stack([c["motor_cmd"] for c in after])
    assert np.all(motors["kp"] == 0) and np.all(motors["kd"][:, :29] > 0)
    assert all(int(c["reserve"][0]) == 0 for c in after)                    # no longer answers a tick
    assert not metrics.exists()                                             # killed: the bridge wrote nothing
    printed = []
    assert run_verdict(str(metrics), str(events), str(verdict), 60.0, printed.append) == 1
    v = json.loads(verdict.read_text())
    assert v["simulator_stopped"] and not v["judged"] and "stayed_up" not in v
    assert any("did the simulator stop?" in e["reason"] for e in v["safety_events"])
    assert "the simulator stopped before the end" in printed[0]
