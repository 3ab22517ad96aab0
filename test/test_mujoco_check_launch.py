"""`bcg launch mujoco_check.launch.py` end to end: bridge + node + evaluator on loopback DDS."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

BCG = str(Path(sys.executable).with_name("bcg"))


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
    assert [p["to"] for p in v["phases"]][:4] == ["zero_torque", "ramp", "hold", "policy"]
    assert v["policy_steps"] > 0
    assert "stopped:" in out and "[evaluator] verdict" in out   # the node stopped cleanly before the verdict
    assert Path(v["files"]["table"]).read_text().startswith("mujoco_check verdict")
