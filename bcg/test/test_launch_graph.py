"""The launch graph description, the `bcg launch` supervisor (with small shell processes) and the verdict."""
import dataclasses
import io
import json
import signal
import threading
import time
from pathlib import Path

import pytest

from bcg.cli import find_launch_file, load_graph
from bcg.contract import read_contract
from bcg.contract.policy_file import read_model, write_policy
from bcg.launch_graph import (
    G1_RUN,
    MUJOCO_CHECK,
    LaunchArgumentError,
    ProcessSpec,
    Supervisor,
    parse_assignments,
    run_files,
)
from bcg.launch_graph.verdict import evaluate, table
from bcg.launch_graph.verdict import run as run_verdict

REPO = Path(__file__).resolve().parents[2]


def test_launch_files_declare_the_shared_graphs():
    assert load_graph(find_launch_file("mujoco_check.launch.py")) is MUJOCO_CHECK
    assert load_graph(find_launch_file("g1_run.launch.py")) is G1_RUN
    assert {a.name: a.default for a in G1_RUN.arguments}["domain_id"] == "0"
    assert {a.name: a.default for a in MUJOCO_CHECK.arguments}["domain_id"] == "1"


def test_mujoco_check_graph_wires_bridge_node_and_evaluator(tmp_path):
    verdict = str(tmp_path / "v.json")
    procs = MUJOCO_CHECK.processes(parse_assignments([f"verdict:={verdict}", "policy:=p.onnx", "duration:=3",
                                                      "record:=run.gif", "record_fps:=10", "domain_id:=7"]))
    bridge, node, evaluator = procs
    assert [p.role for p in procs] == ["main", "service", "final"]
    files = run_files(verdict)
    assert {"--record", "run.gif", "--duration", "3.0", "--metrics", files["metrics"]} <= set(bridge.arguments)
    assert bridge.arguments[bridge.arguments.index("--record-fps") + 1] == "10"
    assert "--record-width" not in bridge.arguments      # not given: config/sim_bridge.yaml's
    assert {"--policy", "p.onnx", "--autostart", "--events", files["events"], "7"} <= set(node.arguments)
    assert "--lockstep" in bridge.arguments and "--lockstep" in node.arguments    # simulated time on both sides
    assert "--seed" not in bridge.arguments
    seeded = MUJOCO_CHECK.processes(parse_assignments(["seed:=3"]))[0].arguments
    assert seeded[seeded.index("--seed") + 1] == "3"
    assert evaluator.arguments[:1] == ("verdict",) and verdict in evaluator.arguments
    assert "--policy" not in MUJOCO_CHECK.processes({})[1].arguments     # default: built-in stand policy
    assert "--motion-lead-in" not in bridge.arguments                          # no motion: no tracking


def test_mujoco_check_tells_the_bridge_the_policys_lead_in(tmp_path):
    """The bridge tracks the reference the node follows: the policy's contract's lead-in reaches it;
    a policy file that cannot be read is named before anything starts."""
    policy = REPO / "policies" / "shac_synthetic_dance_k300.onnx"
    bridge = MUJOCO_CHECK.processes(parse_assignments([f"policy:={policy}", "motion:=m.csv"]))[0].arguments
    assert bridge[bridge.index("--motion-lead-in") + 1] == "0.0"
    led = dataclasses.replace(read_contract(policy), motion_lead_in_s=1.0)
    path = write_policy(tmp_path / "led.onnx", read_model(policy), led)
    bridge = MUJOCO_CHECK.processes(parse_assignments([f"policy:={path}", "motion:=m.csv"]))[0].arguments
    assert bridge[bridge.index("--motion-lead-in") + 1] == "1.0"
    with pytest.raises(LaunchArgumentError, match=r"^policy='missing\.onnx': policy file missing\.onnx: does not"):
        MUJOCO_CHECK.processes(parse_assignments(["policy:=missing.onnx", "motion:=m.csv"]))


@pytest.mark.parametrize("items, message", [
    (["polcy:=x"], "unknown argument"), (["policy=x"], "^'policy=x': no ':='; expected KEY:=VALUE"),
    (["duration:=soon"], "^duration='soon': a string; expected a number"),
    (["duration:=0"], r"^duration=0: too small; expected a number >= 0.1$"),
    (["headless:=maybe"], "^headless='maybe': not a boolean; expected true or false$")])
def test_bad_arguments_are_named(items, message):
    with pytest.raises(LaunchArgumentError, match=message):
        MUJOCO_CHECK.processes(parse_assignments(items))


def sh(name, script, role="service"):
    return ProcessSpec(name, "none", "none", "sh", ("-c", script), role=role)


def supervise(processes):
    out, log = io.StringIO(), []
    return Supervisor(processes, out=out, log=log.append).run(), out.getvalue(), log


def test_main_ending_stops_services_then_final_decides(tmp_path):
    marker = tmp_path / "stopped"
    service = sh("svc", f"trap 'echo bye > {marker}; exit 0' INT; while true; do sleep 0.05; done")
    rc, out, _ = supervise([sh("main", "sleep 0.3; echo done", "main"), service,
                            sh("final", "echo judged; exit 3", "final")])
    assert rc == 3 and marker.read_text() == "bye\n"
    assert "[main] done" in out and "[final] judged" in out


def test_a_dying_service_stops_the_rest_with_nonzero_exit():
    start = time.monotonic()
    rc, _, log = supervise([sh("main", "sleep 30", "main"), sh("svc", "sleep 0.2; exit 4"),
                            sh("final", "echo never", "final")])
    assert rc == 4 and time.monotonic() - start < 10
    assert any("svc exited with 4" in line for line in log)


@pytest.mark.parametrize("code", [0, 3])
def test_a_graph_without_a_main_process_ends_as_its_service_does(code):
    """g1_run: the policy node alone; as under ros2 launch (`Lifecycle`), its exit code is the launch's."""
    rc, _, log = supervise([sh("node", f"sleep 0.1; exit {code}")])
    assert rc == code and "node exited with %d" % code in log


def test_a_service_that_ignores_sigint_is_terminated_and_fails_the_launch(monkeypatch):
    from bcg.launch_graph import supervisor
    monkeypatch.setattr(supervisor, "STOP_GRACE_S", 0.3)
    stubborn = sh("svc", "trap '' INT; while true; do sleep 0.05; done")
    start = time.monotonic()
    rc, _, log = supervise([sh("main", "sleep 0.2", "main"), stubborn, sh("final", "echo never", "final")])
    assert rc == 1 and time.monotonic() - start < 10
    assert f"svc exited with {-signal.SIGTERM}" in log
    assert any("while being stopped" in line for line in log)


def test_sigint_stops_everything():
    sup = Supervisor([sh("a", "sleep 30", "main"), sh("b", "sleep 30")], out=io.StringIO(), log=lambda m: None)
    threading.Timer(0.3, lambda: sup._interrupt(signal.SIGINT, None)).start()
    start = time.monotonic()
    assert sup.run() == 130 and time.monotonic() - start < 10


def metrics(fell=False, sim_time=5.0):
    return {"sim_time_s": sim_time, "wall_time_s": 5.0, "elastic_band": None,
            "commands": {"accepted": 2500, "rejected": {"crc": 1}, "rejected_total": 1, "damping_fallbacks": 0},
            "evaluation": {"fell": fell, "fall_time_s": 2.5 if fell else None, "foot_penetration_mean_m": 0.002,
                           "foot_penetration_max_m": 0.006, "min_root_height_m": 0.7,
                           "tracking": {"mean_rms_error_rad": 0.05}}}


def events(*transitions, policy_steps=100):
    return {"transitions": list(transitions), "summary": {"policy_steps": policy_steps}}


def test_verdict_fields_and_safety_events():
    fault = {"time_s": 1.0, "from": "policy", "to": "damping", "reason": "|dq| = 40 rad/s", "state_tick_ms": 2000}
    end = {"time_s": 9.0, "from": "policy", "to": "damping", "reason": "LowState stale: 61 ms", "state_tick_ms": 5000}
    stop = {"time_s": 9.1, "from": "damping", "to": "damping", "reason": "stop requested (SIGINT)"}
    v = evaluate(metrics(), events(fault, end, stop), 5.0)
    assert v["passed"] and v["stayed_up"] and v["command_rate_hz"] == 500.0 and v["commands_rejected"] == 1
    assert v["foot_penetration_mean_mm"] == pytest.approx(2.0) and v["tracking_error_rad"] == 0.05
    assert v["safety_events"] == [fault]                 # the stale event after the bridge ended is not one
    assert not evaluate(metrics(fell=True), events(), 5.0)["passed"]
    assert not evaluate(metrics(sim_time=2.0), events(), 5.0)["passed"]


def test_a_run_whose_policy_never_ran_fails_and_says_so():
    """Every shipped policy used to fall in the node's ramp or hold without its band: 0 policy steps."""
    v = evaluate(metrics(), events(policy_steps=0), 5.0)
    assert v["stayed_up"] and not v["passed"] and not v["policy_ran"]
    assert "0: the policy never ran" in table(v) and "FAIL" in table(v)
    assert v["tracking_error_rad"] is None                   # the bridge's tracking measured no policy
    assert "n/a (the policy never ran)" in table(v)


def test_the_command_rate_is_per_simulated_second_and_explained():
    """A real-time check read 541.7 Hz with writer_hz 500: the writer's schedule plus one write at
    each policy step; the table says so. In lockstep it is one command per LowState."""
    m = {**metrics(sim_time=15.0), "wall_time_s": 15.0}
    m["commands"] = {**m["commands"], "accepted": 8126}
    summary = {"policy_steps": 625, "commands_written": 8126, "commands_woken": 626}
    v = evaluate(m, {"transitions": [], "summary": summary}, 15.0)
    assert v["command_rate_hz"] == pytest.approx(541.7, abs=0.05) and not v["lockstep"]
    assert "541.7 Hz (500.0 Hz on the writer's schedule + 41.7 Hz at once at policy steps)" in table(v)
    m["lockstep"], m["wall_time_s"] = {"answers": 7500, "ended_at_s": None}, 40.0
    v = evaluate(m, {"transitions": [], "summary": summary}, 15.0)
    assert v["lockstep"] and "(one per LowState)" in table(v) and "lockstep" in table(v)
    assert v["real_time_factor"] == pytest.approx(0.375)


def test_the_verdict_reports_what_each_node_dropped_by_reason():
    summary = {"policy_steps": 10, "final_phase": "damping",
               "states_dropped": {"crc": 1250, "malformed": 0, "non_finite": 0, "not_ready": 80}}
    v = evaluate(metrics(), {"transitions": [], "summary": summary}, 5.0)
    assert v["states_dropped_by_reason"] == summary["states_dropped"]
    assert v["commands_rejected_by_reason"] == {"crc": 1}
    text = table(v)
    assert "commands rejected" in text and "1 of 2501 (crc 1)" in text
    assert "LowStates dropped by the node  1330 (crc 1250, not_ready 80)" in text


def test_verdict_files_and_exit_codes(tmp_path):
    m, e, v = tmp_path / "m.json", tmp_path / "e.jsonl", tmp_path / "v.json"
    m.write_text(json.dumps(metrics(fell=True)))
    e.write_text(json.dumps({"transition": {"time_s": 0, "from": "wait", "to": "zero_torque", "reason": "x"}}) + "\n")
    printed = []
    assert run_verdict(str(m), str(e), str(v), 5.0, printed.append) == 1
    assert json.loads(v.read_text())["fall_time_s"] == 2.5
    assert "NO, fell at 2.50 s" in (tmp_path / "v.txt").read_text() == printed[0] + "\n"
    assert run_verdict(str(m), str(tmp_path / "missing.jsonl"), str(v), 5.0, printed.append) == 2


def test_a_bridge_that_left_no_metrics_is_the_simulator_stopping_not_the_policy_falling(tmp_path):
    e, v = tmp_path / "e.jsonl", tmp_path / "v.json"
    stale = {"time_s": 3.0, "from": "policy", "to": "damping", "state_tick_ms": 3000,
             "reason": "LowState stale: newest is 3000 ms old (limit 3000 ms) in lockstep: did the simulator stop?"}
    e.write_text(json.dumps({"transition": stale}) + "\n" + json.dumps({"summary": {"policy_steps": 40}}) + "\n")
    printed = []
    assert run_verdict(str(tmp_path / "missing.json"), str(e), str(v), 5.0, printed.append) == 1
    verdict = json.loads(v.read_text())
    assert verdict["simulator_stopped"] and not verdict["passed"] and not verdict["judged"]
    assert "stayed_up" not in verdict and "fall_time_s" not in verdict          # no fall is reported
    assert "the simulator stopped before the end" in printed[0] and "fell" not in printed[0]
    assert "did the simulator stop?" in printed[0]


def test_a_real_time_run_below_0_9x_is_not_real_time_and_not_judged():
    """A real-time run beside two trainings reached 0.41-0.74x: its fall is not the policy's."""
    m = {**metrics(fell=True), "wall_time_s": 5.0 / 0.6, "pacing_slips": 37}
    v = evaluate(m, events(), 5.0)
    assert v["pacing"] == "not real time" and not v["judged"] and not v["passed"]
    assert v["real_time_factor"] == pytest.approx(0.6) and v["pacing_slips"] == 37
    text = table(v)
    assert "NO VERDICT: not real time (0.60x" in text and "37 pacing slip(s)" in text
    v = evaluate({**metrics(), "wall_time_s": 5.0 / 0.95, "pacing_slips": 1}, events(), 5.0)
    assert v["pacing"] == "real time" and v["judged"] and v["passed"] and "PASS (real time)" in table(v)
    v = evaluate({**metrics(), "wall_time_s": 20.0, "lockstep": {"answers": 2500, "ended_at_s": None}}, events(), 5.0)
    assert v["pacing"] == "lockstep" and v["judged"] and v["passed"] and "PASS (lockstep)" in table(v)
    assert "0.25x real time, which cannot change the result" in table(v)


def test_the_verdict_file_carries_the_pacing(tmp_path):
    m, e, v = tmp_path / "m.json", tmp_path / "e.jsonl", tmp_path / "v.json"
    m.write_text(json.dumps({**metrics(), "wall_time_s": 10.0, "pacing_slips": 4}))
    e.write_text(json.dumps({"summary": {"policy_steps": 100}}) + "\n")
    run_verdict(str(m), str(e), str(v), 5.0, lambda _: None)
    verdict = json.loads(v.read_text())
    assert verdict["real_time_factor"] == 0.5 and verdict["pacing_slips"] == 4 and verdict["pacing"] == "not real time"
