"""`bcg launch mujoco_check.launch.py` end to end: bridge + node + evaluator on loopback DDS, in lockstep
(simulated time on both sides: the result does not depend on the machine's load)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

BCG = str(Path(sys.executable).with_name("bcg"))
REPO = Path(__file__).resolve().parents[1]
DANCE = REPO / "policies" / "shac_synthetic_dance_k300.onnx"


@pytest.mark.timeout(120)
def test_stand_policy_stays_up_on_the_elastic_band(tmp_path):
    verdict = tmp_path / "verdict.json"
    proc = subprocess.run([BCG, "launch", "mujoco_check.launch.py", "duration:=3", f"verdict:={verdict}",
                           "elastic_band:=true", "domain_id:=68"], capture_output=True, text=True, timeout=110)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    v = json.loads(verdict.read_text())
    assert v["passed"] and v["stayed_up"] and v["sim_time_s"] == pytest.approx(3.0, abs=0.01)
    assert v["foot_penetration_mean_mm"] > 0          # the band holds the robot on its feet, never lifts it
    assert v["commands_accepted"] > 0 and v["commands_rejected"] == 0 and v["safety_events"] == []
    assert [p["to"] for p in v["phases"]][:4] == ["zero_torque", "ramp", "hold", "blend"]
    assert v["policy_steps"] > 0
    assert "stopped:" in out and "[evaluator] verdict" in out   # the node stopped cleanly before the verdict
    assert Path(v["files"]["table"]).read_text().startswith("mujoco_check verdict")


@pytest.mark.timeout(240)
def test_the_shipped_synthetic_dance_policy_passes_without_the_band(tmp_path):
    """Without a band every shipped policy fell in the node's ramp or hold (1.53 s, 0 policy steps): they
    held the robot with the policy's own gains. Standing on its own from the start (a seeded start:
    turned, joints off by 0.02 rad), the hand-over (ramp and hold with the stand gains, then the blend)
    gets the dance policy going and it dances to the end: bench/handover_checks.py, one seed of one policy."""
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "handover_checks.py"), "--policies", str(DANCE),
                           "--seeds", "1", "--out", str(tmp_path), "--domain", "69"],
                          capture_output=True, text=True, timeout=230)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and out.rstrip().endswith("passed=1/1"), out
    v = json.loads((tmp_path / DANCE.stem / "seed0.json").read_text())
    assert v["passed"] and v["lockstep"] and v["sim_time_s"] == pytest.approx(15.0, abs=0.01), out
    assert v["min_root_height_m"] > 0.6 and v["safety_events"] == [] and v["elastic_band"] is None
    assert [p["to"] for p in v["phases"]][:5] == ["zero_torque", "ramp", "hold", "blend", "policy"]
    assert v["policy_steps"] == pytest.approx(625, abs=3)                  # 12.5 s at 50 Hz, from the blend on
    assert v["start_deviation"]["joint_vel_rad_s"] < 0.1 and v["start_deviation"]["tilt_deg"] < 4.0
    assert v["commands_rejected"] == 0 and v["command_rate_hz"] == pytest.approx(500.0, abs=1.0)
    assert "shac_synthetic_dance_k300 | 1/1 | - |" in (tmp_path / "summary.md").read_text()
