"""bcg-eval: the built-in stand policy holding a standing reference in MuJoCo (bridge core) and in
the Warp simulator from the same initial state; the paper-table numbers and bad input."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from bcg.contract import load_policy, stand_policy_path
from bcg.robot import SDK_JOINT_NAMES, RobotDescription
from bcg_train.diffsim import SimConfig
from bcg_train.evaluation.cli import main
from bcg_train.evaluation.plants import MujocoPlant, WarpPlant
from bcg_train.evaluation.rollout import run_policy
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import load_clip
from bcg_train.motion.resample import ResampleConfig


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


@pytest.fixture(scope="module")
def standing_csv(robot, tmp_path_factory):
    """Two seconds of standing still, in Unitree's LAFAN1 CSV layout (30 fps, SDK joint order)."""
    joints = dict(zip(robot.joint_names, robot.default_q))
    row = np.r_[0.0, 0.0, robot.standing_height, 0.0, 0.0, 0.0, 1.0, [joints[j] for j in SDK_JOINT_NAMES]]
    path = tmp_path_factory.mktemp("motion") / "standing.csv"
    np.savetxt(path, np.tile(row, (61, 1)), delimiter=",")
    return path


def test_stand_policy_stays_up_in_both_simulators(robot, standing_csv, tmp_path):
    policy = load_policy(stand_policy_path(robot, tmp_path))
    clip = load_clip(standing_csv, RobotKinematics(robot), ResampleConfig(rate_hz=50.0))
    results = {name: run_policy(plant, policy, clip, seed=0, duration_s=1.0)
               for name, plant in (("mujoco", MujocoPlant(robot)), ("warp", WarpPlant(SimConfig(kappa=300.0))))}
    for name, r in results.items():
        assert not r.fell and r.duration_s == pytest.approx(1.0), name
        assert r.tracking_error_cm < 3.0, (name, r.tracking_error_cm)
        assert r.tracking_error_root_xy_cm < 3.0, (name, r.tracking_error_root_xy_cm)
        assert r.self_contact_s == 0.0 and r.first_self_contact_s is None, name
    assert -5.0 < results["mujoco"].contact_height_mm < 0.0          # MuJoCo's soft contact: sub-mm to mm
    assert -2.0 < results["warp"].contact_height_mm < 10.0            # the smoothed contact rests near or above it


def test_mujoco_reports_the_legs_touching_each_other(robot):
    """Hips rolled inwards 0.3 rad each (their limit is 0.52) cross the legs: MuJoCo collides them."""
    plant = MujocoPlant(robot)
    joint = {n: k for k, n in enumerate(robot.joint_names)}
    q = np.r_[0.0, 0.0, robot.standing_height + 0.3, 1.0, 0.0, 0.0, 0.0, robot.default_q]
    plant.reset(q, np.zeros(6 + robot.num_joints))
    assert plant.state().self_contacts == 0
    q[7 + joint["left_hip_roll_joint"]], q[7 + joint["right_hip_roll_joint"]] = -0.3, 0.3
    plant.reset(q, np.zeros(6 + robot.num_joints))
    assert plant.state().self_contacts > 0


def test_the_tracking_error_without_the_drift_ignores_only_the_horizontal_root_offset():
    from bcg_train.evaluation.rollout import body_errors
    ref = np.array([[0.0, 0.0, 0.75], [0.1, 0.2, 0.5], [-0.1, 0.2, 0.05]])
    walked_short = ref + np.array([-0.3, 0.4, 0.0])                         # 0.5 m behind, the same pose
    np.testing.assert_allclose(body_errors(walked_short, ref), [0.5, 0.0], atol=1e-12)
    sunk = ref + np.array([0.0, 0.0, -0.2])                                  # a lower pose counts in both
    np.testing.assert_allclose(body_errors(sunk, ref), [0.2, 0.2], atol=1e-12)


def test_cli_prints_the_paper_row_and_writes_json(robot, standing_csv, tmp_path, capsys):
    path = stand_policy_path(robot, tmp_path)
    out = tmp_path / "eval"
    assert main([str(path), "--motion", str(standing_csv), "--seeds", "2", "--duration", "0.5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| standing | 300 | 0/2 | 0/2 |" in printed and "without the drift" in printed
    result = json.loads((out / "eval.json").read_text())
    assert 0.0 < result["summary"]["tracking_error_root_xy_mujoco_cm"] < 3.0
    assert "tracking_error_root_xy_cm" in result["runs"]["mujoco"][0]
    assert result["summary"]["self_contact_mujoco_s"] == 0.0
    assert result["summary"]["falls_mujoco"] == 0 and len(result["runs"]["warp"]) == 2
    assert np.isfinite(result["summary"]["penetration_diff_mm"])


def test_cli_refuses_bad_input_with_a_clear_message(robot, tmp_path, capsys):
    assert main([str(tmp_path / "missing.onnx")]) == 2
    assert "missing.onnx" in capsys.readouterr().err
    path = stand_policy_path(robot, tmp_path)
    assert main([str(path)]) == 2                                     # the stand policy names no motion
    assert "give --motion" in capsys.readouterr().err
    assert main([str(path), "--motion", "x.csv", "--start", "1", "--dds"]) == 2
    assert "--start: mujoco_check over DDS plays the motion from its start" in capsys.readouterr().err


def test_a_run_can_start_later_in_the_motion_and_ends_with_it(robot, standing_csv, tmp_path, capsys):
    path = stand_policy_path(robot, tmp_path)
    out = tmp_path / "eval"
    args = [str(path), "--motion", str(standing_csv), "--seeds", "1", "--duration", "1.0", "--mujoco-only"]
    assert main([*args, "--start", "1.5", "--out", str(out)]) == 0    # 0.5 s of the 2 s motion are left
    result = json.loads((out / "eval.json").read_text())
    assert result["start_s"] == 1.5 and result["runs"]["mujoco"][0]["duration_s"] == pytest.approx(0.5)
    assert main([*args, "--start", "2.5"]) == 2
    assert "start 2.5 s: outside the motion's 2.00 s" in capsys.readouterr().err


def test_a_run_from_rest_stands_where_the_reference_starts_facing_its_way(robot, tmp_path):
    """Standing still 2 m away, facing 90 deg: from rest is the reference's own state (tracking ~0)."""
    joints = dict(zip(robot.joint_names, robot.default_q))
    yaw = np.pi / 2
    row = np.r_[2.0, -1.0, robot.standing_height, 0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2),
                [joints[j] for j in SDK_JOINT_NAMES]]
    standing = tmp_path / "turned.csv"
    np.savetxt(standing, np.tile(row, (61, 1)), delimiter=",")
    out = tmp_path / "eval"
    assert main([str(stand_policy_path(robot, tmp_path)), "--motion", str(standing), "--seeds", "1",
                 "--duration", "1.0", "--from-rest", "--out", str(out)]) == 0
    result = json.loads((out / "eval.json").read_text())
    assert result["from_rest"] is True
    for plant in ("mujoco", "warp"):
        run = result["runs"][plant][0]
        assert not run["fell"] and run["tracking_error_cm"] < 3.0, (plant, run)


def test_a_hold_before_the_policy_stands_unsupported_under_the_policys_gains(capsys, tmp_path):
    """`--hold S`: the robot first stands S s in the default pose under the policy's gains without
    support. The shipped synthetic_dance policy's gains (a tenth of the stand policy's) let the G1
    lean and sag: after a 0.2 s hold its policy takes over and stays up; after a 3 s hold it has
    fallen by the time the policy starts (at its first step). Only from rest."""
    policy = str(Path(__file__).resolve().parents[2] / "policies" / "shac_synthetic_dance_k300.onnx")
    args = [policy, "--seeds", "1", "--duration", "1.0", "--from-rest", "--mujoco-only"]
    short, long = tmp_path / "short", tmp_path / "long"
    assert main([*args, "--hold", "0.2", "--out", str(short)]) == 0
    assert main([*args, "--hold", "3.0", "--out", str(long)]) == 0
    short, long = (json.loads((d / "eval.json").read_text()) for d in (short, long))
    assert short["hold_s"] == 0.2 and not short["runs"]["mujoco"][0]["fell"]
    assert long["runs"]["mujoco"][0]["fell"] and long["runs"]["mujoco"][0]["fall_time_s"] == pytest.approx(0.02)
    assert main([policy, "--hold", "0.5"]) == 2
    assert "--hold: seconds >= 0, with --from-rest only" in capsys.readouterr().err


def test_a_diverging_simulation_counts_as_a_fall(robot, standing_csv, tmp_path):
    from bcg_train.diffsim import NonFiniteStateError

    class Diverging(WarpPlant):
        calls = 0

        def advance(self, *args):
            Diverging.calls += 1
            if Diverging.calls == 3:
                raise NonFiniteStateError([0])
            super().advance(*args)

    policy = load_policy(stand_policy_path(robot, tmp_path))
    clip = load_clip(standing_csv, RobotKinematics(robot), ResampleConfig(rate_hz=50.0))
    r = run_policy(Diverging(SimConfig(kappa=300.0)), policy, clip, seed=0, duration_s=1.0)
    assert r.fell and r.fall_time_s == pytest.approx(0.06) and r.duration_s == pytest.approx(0.04)


def test_a_dds_run_without_a_verdict_is_not_read_as_one(tmp_path, monkeypatch):
    """A failed launch leaves no verdict: neither an old file nor a crash stands in for it."""
    import subprocess

    from bcg_train.evaluation import cli
    (tmp_path / "mujoco_check_0.json").write_text('{"stayed_up": true, "foot_penetration_mean_mm": 1.0}')
    monkeypatch.setattr(cli.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 2))
    result = cli.run_dds(tmp_path / "p.onnx", tmp_path / "m.csv", 2, 1.0, tmp_path)
    assert result["runs"] == 0 and result["failed_runs"] == 2 and result["stayed_up"] == 0


def test_warp_plant_runs_the_simulator_settings_the_contract_records():
    cfg = SimConfig.from_contract(100.0, {"substeps": 2, "contact_iterations": 6.0, "limit_damping": 0.3})
    assert (cfg.kappa, cfg.substeps, cfg.contact_iterations, cfg.limit_damping) == (100.0, 2, 6, 0.3)
    assert isinstance(cfg.contact_iterations, int)
    assert WarpPlant(cfg).sim.config.substeps == 2
    assert SimConfig.from_contract(300.0, {}) == SimConfig(kappa=300.0)          # an older contract: defaults
    with pytest.raises(ValueError, match="records setting 'timestep'"):
        SimConfig.from_contract(300.0, {"timestep": 0.001})
    with pytest.raises(ValueError, match=r"^simulator\.substeps=2\.5: not a whole number; expected an integer$"):
        SimConfig.from_contract(300.0, {"substeps": 2.5})
    with pytest.raises(ValueError, match=r"^simulator\.contact_iterations=0: too small; expected an integer >= 1$"):
        SimConfig.from_contract(300.0, {"contact_iterations": 0})


@pytest.mark.skipif(not os.path.isdir(os.environ.get("BCG_MOTION_DIR") or "/nonexistent"),
                    reason="the table's motions are the named LAFAN1 segments: set BCG_MOTION_DIR (tools/test.sh "
                           "and .ci/run point it at ../shared/motions/lafan1_g1 beside the checkout)")
def test_table_reports_the_cells_present_cites_their_commands_and_lists_the_rest(robot, tmp_path):
    import shutil

    import onnx

    from bcg_train.evaluation import table as table_module
    from bcg_train.evaluation.table import main as table_main
    folder = tmp_path / "policies"
    folder.mkdir()
    shutil.copy(stand_policy_path(robot, tmp_path), folder / "shac_dance_k300.onnx")
    (folder / "shac_dance_k300.json").write_text(json.dumps({
        "train_command": "bcg-train --preset x --motion dance", "env_steps": 256000,
        "init_from": {"policy": "shac_dance_k300.onnx", "motion": "dance"}}))
    shutil.copy(folder / "shac_dance_k300.onnx", folder / "ppo_dance_k300.onnx")     # a stand-in baseline
    (folder / "ppo_dance_k300.json").write_text(json.dumps({
        "train_command": "bcg-train --preset x --algo ppo --motion dance", "env_steps": 1228800}))
    out = tmp_path / "table"
    args = [str(folder), "--motions", "dance,jump", "--kappas", "300", "--seeds", "1", "--duration", "1", "--out",
            str(out)]
    assert table_main(args) == 0
    text = (out / "table.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| dance | 300 |"))
    assert "/1 / 0 |" in row                                     # falls out of 1 seed, the paper's 0 beside it
    assert row.count("|") == 13 and "without the drift" in text  # 12 columns
    assert row.endswith("| 0/1 | 0/1 | 0.00 |")    # up from rest too, and after a hold; its legs never touch
    assert "bcg-train --preset x --motion dance` (256,000 environment steps, started from the policy " \
        "shac_dance_k300.onnx)" in text and "bcg-eval" in text
    cols = row.split(" | ")          # the stand-in baseline is the same file: its falls and tracking, the paper's
    assert cols[7] == f"{cols[2].split(' / ')[0]}, {cols[5].split(' / ')[0]} / 19.0"
    assert "## The PPO baseline" in text and "--algo ppo --motion dance` (1,228,800 environment steps)" in text
    assert "no `shac_jump_k300.onnx`" in text
    cached = json.loads((folder / "shac_dance_k300.eval.json").read_text())
    assert cached["seeds"] == 1 and cached["duration_s"] == 1.0 and len(cached["runs"]["mujoco_from_rest"]) == 1
    assert cached["command_after_hold"].endswith("--from-rest --hold 0.4 --mujoco-only")
    assert len(cached["runs"]["mujoco_after_hold"]) == 1
    # the same file is not evaluated again; a policy shipped anew under the same name is
    logged = []
    table_module.rows_of(folder, ["dance"], [300.0], 1, 1.0, None, logged.append)
    assert not any("evaluating" in line for line in logged)
    # an evaluation written before the table read the legs' self-contact is evaluated again
    older = json.loads((folder / "shac_dance_k300.eval.json").read_text())
    del older["summary"]["self_contact_mujoco_s"]
    (folder / "shac_dance_k300.eval.json").write_text(json.dumps(older))
    table_module.rows_of(folder, ["dance"], [300.0], 1, 1.0, None, logged.append)
    assert [line for line in logged if "evaluating" in line] == [
        f"evaluating {folder / 'shac_dance_k300.onnx'} for the legs' self-contact (1 seeds x 1 s, MuJoCo)"]
    again = json.loads((folder / "shac_dance_k300.eval.json").read_text())
    assert again["summary"]["self_contact_mujoco_s"] == 0.0 and again["runs"]["mujoco"] == cached["runs"]["mujoco"]
    logged.clear()
    model = onnx.load(folder / "shac_dance_k300.onnx")
    model.doc_string = "shipped anew"
    onnx.save(model, folder / "shac_dance_k300.onnx")
    table_module.rows_of(folder, ["dance"], [300.0], 1, 1.0, None, logged.append)
    assert sum("evaluating" in line for line in logged) == 3      # on the reference, from rest, after a hold
    assert (out / "table.csv").is_file() and (out / "table.png").is_file()
    assert table_main([str(tmp_path / "nowhere")]) == 2


def test_the_train_command_sets_what_differs_from_the_preset_including_settings_the_run_predates(tmp_path):
    from bcg_train.evaluation.ship import train_command
    from bcg_train.train_config import load_preset
    config = load_preset("cpu-small").to_dict()
    config["shac"]["init_action_std"] = 0.3
    assert train_command({"motion": "dance", "preset": "cpu-small"}, config) == (
        "bcg-train --preset cpu-small --motion dance --set shac.init_action_std=0.3")
    preset = tmp_path / "newer.yaml"              # a preset that turns on a setting this config does not record
    preset.write_text("env:\n  reference_root_velocity: true\n")
    del config["env"]["reference_root_velocity"]
    command = train_command({"motion": "dance", "preset": str(preset)}, config)
    assert "--set env.reference_root_velocity=false" in command
