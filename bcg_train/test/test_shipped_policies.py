"""The policies the repository ships (policies/): each ONNX file's contract agrees with its sidecar
(how it was trained), its evaluation JSON is there, and `bcg-eval` in MuJoCo reproduces the falls
the evaluation reports, seed for seed (on the reference, from rest and after a hold). The main
job's default (a policy trained on a built-in motion, so no data is needed) is always checked;
policies on real motion capture are checked when its files are found ($BCG_MOTION_DIR), and
skipped with the reason otherwise.
"""
import json
from pathlib import Path

import pytest

from bcg.contract import load_policy
from bcg.motion import MotionFileError
from bcg.robot import RobotDescription
from bcg_train.evaluation.cli import evaluate
from bcg_train.evaluation.ship import SIDECAR_FORMAT, train_commands
from bcg_train.evaluation.table import HOLD_S, policy_name
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import load_clip
from bcg_train.motion.resample import ResampleConfig

POLICIES = Path(__file__).resolve().parents[2] / "policies"
MAIN_JOB_POLICY = "shac_synthetic_dance_k300"
"""tools/main.sh's default shipped policy."""
SIDECARS = sorted(p for p in POLICIES.glob("*.json") if not p.name.endswith(".eval.json"))


def test_the_main_jobs_policy_is_shipped():
    assert (POLICIES / f"{MAIN_JOB_POLICY}.onnx").is_file() and (POLICIES / f"{MAIN_JOB_POLICY}.json").is_file()


@pytest.mark.parametrize("sidecar_path", SIDECARS, ids=[p.stem for p in SIDECARS])
def test_contract_sidecar_and_evaluation_agree(sidecar_path):
    sidecar = json.loads(sidecar_path.read_text())
    assert sidecar["format"] == SIDECAR_FORMAT
    onnx_path = POLICIES / sidecar["policy"]
    contract = load_policy(onnx_path).contract
    assert contract.motion == sidecar["motion"]
    assert contract.contact_stiffness == pytest.approx(sidecar["kappa"])
    assert sidecar_path.stem == policy_name(sidecar["algorithm"], sidecar["motion"], sidecar["kappa"])
    # the recorded commands are the ones this code derives from the recorded config, preset and schedule
    run_info = {"motion": sidecar["motion"], "preset": sidecar["preset"]}
    run_info.update({k: sidecar[k] for k in ("schedule", "init_from") if sidecar.get(k)})
    assert [sidecar["train_command"], *sidecar.get("resume_commands", [])] == train_commands(
        run_info, sidecar["config"], sidecar["iteration"])
    evaluation = json.loads((POLICIES / f"{sidecar_path.stem}.eval.json").read_text())
    assert evaluation["motion"] == sidecar["motion"] and evaluation["kappa"] == pytest.approx(sidecar["kappa"])
    assert len(evaluation["runs"]["mujoco"]) == evaluation["summary"]["seeds"] == evaluation["seeds"]


@pytest.mark.parametrize("sidecar_path", SIDECARS, ids=[p.stem for p in SIDECARS])
def test_bcg_eval_reproduces_the_falls(sidecar_path):
    name = sidecar_path.stem
    evaluation = json.loads((POLICIES / f"{name}.eval.json").read_text())
    try:
        load_clip(evaluation["motion"], RobotKinematics(RobotDescription.load()), ResampleConfig())
    except MotionFileError as e:
        pytest.skip(f"{name}: its reference motion is not available here ({e})")
    again = evaluate(POLICIES / f"{name}.onnx", evaluation["motion"], evaluation["seeds"],
                     evaluation["duration_s"], warp=False)
    recorded = [run["fell"] for run in evaluation["runs"]["mujoco"]]
    assert [run["fell"] for run in again["runs"]["mujoco"]] == recorded
    assert again["summary"]["falls_mujoco"] == evaluation["summary"]["falls_mujoco"]
    for start, hold_s in (("from_rest", 0.0), ("after_hold", HOLD_S)):
        again = evaluate(POLICIES / f"{name}.onnx", evaluation["motion"], evaluation["seeds"],
                         evaluation["duration_s"], warp=False, from_rest=True, hold_s=hold_s)
        assert [run["fell"] for run in again["runs"]["mujoco"]] == [
            run["fell"] for run in evaluation["runs"][f"mujoco_{start}"]], start
