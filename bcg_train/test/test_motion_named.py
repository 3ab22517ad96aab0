"""`--motion NAME`: named segments of real motion capture and the built-in synthetic motions; the
file check (`python -m bcg_train.motion check`: spikes, limits, flights, root speed); on the shared
LAFAN1 G1 data when it is there."""
import os
from pathlib import Path

import numpy as np
import pytest

from bcg.motion import LAFAN1_FPS, MotionDirNotFoundError, ReferenceMotion, load_motion, save_motion_csv
from bcg.motion.segments import ENV_VAR
from bcg.robot import RobotDescription
from bcg_train import cli
from bcg_train.motion.__main__ import main as motion_main
from bcg_train.motion.checks import FileCheckLimits, check_file_motion
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import BUILTIN_MOTIONS, load_clip, motion_file_for_nodes
from bcg_train.motion.resample import ResampleConfig

MOTION_DIR = Path(os.environ.get(ENV_VAR) or "/nonexistent")
needs_data = pytest.mark.skipif(
    not MOTION_DIR.is_dir(), reason=f"no LAFAN1 G1 motion folder: set {ENV_VAR} (tools/test.sh and .ci/run point "
                                    "it at ../shared/motions/lafan1_g1 beside the checkout)")


@pytest.fixture(scope="module")
def kinematics():
    return RobotKinematics(RobotDescription.load())


@pytest.fixture
def no_motion_dir(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "")      # restored afterwards, also when a command line sets it


def _standing_with_spike(robot, frames=60) -> ReferenceMotion:
    """Standing in the default pose at 30 fps; the left elbow swings gently, with one 4 rad outlier."""
    q = np.tile(robot.default_q, (frames, 1))
    elbow = robot.joint_names.index("left_elbow_joint")
    q[:, elbow] += 0.3 * np.sin(np.arange(frames) / LAFAN1_FPS * 2 * np.pi)
    q[30, elbow] += 0.5 if q[30, elbow] + 0.5 < robot.q_upper[elbow] else -0.5   # 15 rad/s in and out
    root = np.tile([0.0, 0.0, 0.76], (frames, 1))          # feet about 3 mm above the floor
    quat = np.tile([1.0, 0, 0, 0], (frames, 1))
    return ReferenceMotion(LAFAN1_FPS, robot.joint_names, q, np.zeros_like(q), root, quat)


def test_named_motion_without_data_is_a_plain_error(kinematics, no_motion_dir):
    with pytest.raises(MotionDirNotFoundError) as e:
        load_clip("run", kinematics)
    message = str(e.value)
    assert "run1_subject2.csv 61-76 s" in message and "--motion-dir" in message and ENV_VAR in message
    assert "Built-in synthetic motions need no data: " + ", ".join(BUILTIN_MOTIONS) in message
    assert BUILTIN_MOTIONS == ("synthetic_run", "synthetic_jump", "synthetic_fight", "synthetic_dance")


def test_bcg_train_says_plainly_when_the_data_is_missing(no_motion_dir, tmp_path, capsys):
    args = ["--preset", "cpu-smoke", "--motion", "jump", "--run-dir", str(tmp_path / "run")]
    assert cli.main(args) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("bcg-train: motion 'jump' is jumps1_subject1.csv") and "Traceback" not in err
    assert cli.main(args + ["--motion-dir", str(tmp_path / "nowhere")]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == f"bcg-train: --motion-dir names {tmp_path / 'nowhere'}, which is not a folder\n"
    (tmp_path / "empty").mkdir()                           # the flag reaches the environment's loader
    assert cli.main(args + ["--motion-dir", str(tmp_path / "empty")]) == cli.EXIT_USAGE
    assert f"{tmp_path / 'empty' / 'jumps1_subject1.csv'} does not exist" in capsys.readouterr().err


def test_file_check_reports_spikes_and_despike_repairs_them(kinematics, tmp_path, capsys):
    robot = kinematics.robot
    motion = _standing_with_spike(robot)
    report = check_file_motion("standing", motion, kinematics)
    assert report.spikes == [] and report.failures() == [] and report.limit_violations == 0
    assert report.flight_phases == 0 and report.mean_root_speed == 0.0 and report.duration_s == pytest.approx(59 / 30)
    strict = check_file_motion("standing", motion, kinematics, FileCheckLimits(spike_speed=10.0))
    assert [(s.joint, s.frame) for s in strict.spikes] == [("left_elbow_joint", 29), ("left_elbow_joint", 30)]
    assert "2 velocity spike(s) above 10 rad/s" in strict.failures()[0] and "despike=10" in strict.failures()[0]
    path = save_motion_csv(motion, tmp_path / "spiky.csv")
    assert motion_main(["check", "--spike-speed", "10", str(path)]) == 1
    assert "2 velocity spike(s) above 10 rad/s" in capsys.readouterr().out
    assert motion_main(["check", "--spike-speed", "10", f"{path},despike=10"]) == 0
    assert motion_main(["check", "--spike-speed", "10", f"{path},despike=10,bogus=1"]) == 2
    assert "'bogus=1': unknown option; expected fps=HZ" in capsys.readouterr().err


def test_file_check_counts_flight_phases_and_limit_violations(kinematics):
    robot = kinematics.robot
    motion = _standing_with_spike(robot, frames=90)
    root = motion.root_pos.copy()
    root[:, 0] = np.arange(90) * 0.05                      # 1.5 m/s forward
    root[20:26, 2] += 0.1                                  # 6 frames (0.2 s) airborne
    root[50:51, 2] += 0.1                                  # 1 frame: too short to count
    q = motion.joint_pos.copy()
    q[70:73, 0] = robot.q_lower[0] - 0.05                  # left hip pitch past its limit for 3 frames
    moved = ReferenceMotion(LAFAN1_FPS, motion.joint_names, q, q * 0, root, motion.root_quat)
    report = check_file_motion("hop", moved, kinematics)
    assert report.flight_phases == 1 and report.longest_flight_s == pytest.approx(0.2)
    assert report.mean_root_speed == pytest.approx(1.5) and report.limit_violations == 3
    assert report.worst_limit_joint == robot.joint_names[0] and report.worst_limit_excess_rad == pytest.approx(0.05)
    assert "3 joint sample(s) beyond the limits, worst left_hip_pitch_joint by 0.0500 rad" in report.failures()[-1]


def test_node_motion_writes_builtin_and_names_file_windows(kinematics, tmp_path):
    written = motion_file_for_nodes("synthetic_jump", kinematics, tmp_path, builtin_duration_s=4.0)
    assert written == str(tmp_path / "synthetic_jump.csv") and load_motion(written).num_frames == 121
    csv = save_motion_csv(_standing_with_spike(kinematics.robot), tmp_path / "take.csv")
    assert motion_file_for_nodes(f"{csv}@0.5:1", kinematics, tmp_path) == f"{csv}@0.5:1"


def test_node_motion_writes_only_where_told(kinematics, tmp_path, monkeypatch, capsys):
    """`node-motion` prints the nodes' motion argument; a built-in motion, which has no file until
    written, is written only into the folder `--out` names, never into the current directory."""
    model = ["--model", str(kinematics.robot.model_path.resolve())]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as refused:
        motion_main([*model, "node-motion", "synthetic_jump"])
    assert refused.value.code == 2 and "--out DIR" in capsys.readouterr().err and not any(tmp_path.iterdir())
    assert motion_main([*model, "node-motion", "synthetic_jump", "--out", "there", "--duration", "4"]) == 0
    assert capsys.readouterr().out.strip() == str(Path("there") / "synthetic_jump.csv")
    assert [p.name for p in tmp_path.iterdir()] == ["there"]


@needs_data
def test_real_segment_becomes_a_training_clip(kinematics):
    clip = load_clip("jump", kinematics, ResampleConfig(rate_hz=50.0))
    assert clip.name == "jump" and clip.fps == 50.0 and clip.num_frames == 751
    assert clip.joint_names == kinematics.robot.joint_names
    assert clip.root_pos[:, 2].max() - clip.root_pos[0, 2] > 0.05          # it jumps
    assert motion_file_for_nodes("jump", kinematics, "unused") == f"{MOTION_DIR / 'jumps1_subject1.csv'}@5.5:20.5"


@needs_data
def test_real_segments_pass_the_check(capsys):
    assert motion_main(["check", "run", "jump", "fight", "dance", "walk"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert set(rows) == {"run", "jump", "fight", "dance", "walk"}
    for name, row in rows.items():
        seconds, max_speed, spikes, limits = float(row[1]), float(row[3]), int(row[5]), int(row[6])
        assert seconds == 15.0 and max_speed < 20.0 and spikes == 0 and limits == 0 and row[16] == "ok", name
        fall_g, tilted = float(row[13]), row[15]
        assert 0.2 < fall_g < 0.9 and tilted == "0%", name          # under gravity, upright
    assert int(rows["jump"][7]) >= 20                     # flight phases of >= 0.1 s
    assert float(rows["run"][9]) > 1.5                    # mean root speed, m/s
    assert int(rows["walk"][7]) == 0


def test_a_file_of_the_motion_folder_is_found_by_name_from_anywhere(tmp_path, monkeypatch):
    """`take.csv@1:2` not found from here is the motion folder's take.csv; one found here stays here."""
    from bcg_train.motion.library import motion_label, motion_source
    folder, here = tmp_path / "motions", tmp_path / "work"
    folder.mkdir()
    here.mkdir()
    (folder / "take.csv").write_text("0\n")
    monkeypatch.setenv(ENV_VAR, str(folder))
    monkeypatch.chdir(here)
    assert motion_source("take.csv@1:2").path == folder / "take.csv"
    assert motion_source("take.csv@1:2").start_s == 1.0 and motion_label("take.csv@1:2") == "take_1-2"
    (here / "take.csv").write_text("0\n")
    assert motion_source("take.csv@1:2").path == Path("take.csv")
    assert motion_source("other.csv").path == Path("other.csv")      # nowhere: the loader names it
