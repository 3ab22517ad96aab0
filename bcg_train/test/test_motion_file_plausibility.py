"""`python -m bcg_train.motion check` against gravity: a file read at the wrong frame rate, a root
quaternion in the other order and a retargeting float fail, each named, while the named segments
and the built-in motions pass. Bad files are made in tmp_path from a real take (skipped without the
LAFAN1 G1 folder) and from the built-in synthetic motions."""
import os
from dataclasses import replace
from pathlib import Path

import pytest

from bcg.motion import LAFAN1_FPS, ReferenceMotion, load_motion, save_motion_csv
from bcg.motion.resample import at_control_rate
from bcg.motion.segments import ENV_VAR
from bcg.robot import RobotDescription
from bcg_train.motion.__main__ import main as motion_main
from bcg_train.motion.checks import check_file_motion
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import BUILTIN_MOTIONS, write_builtin_motions

MOTION_DIR = Path(os.environ.get(ENV_VAR) or "/nonexistent")
needs_data = pytest.mark.skipif(not (MOTION_DIR / "jumps1_subject1.csv").is_file(),
                                reason=f"no LAFAN1 G1 motion folder: set {ENV_VAR}")
JUMP = "jumps1_subject1.csv@5.5:20.5"
"""The named segment `jump`: 22 flight phases of 0.10-0.37 s."""


def real(segment: str) -> str:
    """The motion spec of `segment` (FILE@START:END) in the LAFAN1 G1 folder."""
    return f"{MOTION_DIR}/{segment}"


@pytest.fixture(scope="module")
def kinematics():
    return RobotKinematics(RobotDescription.load())


@pytest.fixture(scope="module")
def builtin_files(tmp_path_factory):
    """The built-in synthetic motions as 15 s LAFAN1 CSV files (30 fps)."""
    kinematics = RobotKinematics(RobotDescription.load())
    return write_builtin_motions(tmp_path_factory.mktemp("builtin"), kinematics, BUILTIN_MOTIONS, 15.0)


def at_twice_the_rate(motion: ReferenceMotion) -> ReferenceMotion:
    """`motion` resampled to twice its frame rate and labelled with its own: a 60 fps file read at 30."""
    fast = at_control_rate(motion, 2 * motion.fps, motion.joint_names, interpolation="linear")
    return replace(fast, fps=motion.fps)


def write_quat_wxyz(motion: ReferenceMotion, path: Path) -> Path:
    """A LAFAN1 CSV whose root quaternion columns hold w x y z instead of x y z w."""
    save_motion_csv(replace(motion, root_quat=motion.root_quat[:, [3, 0, 1, 2]]), path)
    return path


def failed_check_row(spec: str, capsys) -> str:
    """The table row `motion check spec` prints, asserting that it exits 1 (a motion failed)."""
    code = motion_main(["check", spec])
    row = capsys.readouterr().out.splitlines()[1]
    assert code == 1 and not row.endswith("  ok"), row
    return row


def failures(kinematics, spec) -> list:
    return check_file_motion(str(spec), load_motion(spec), kinematics).failures()


@needs_data
def test_a_60_fps_file_read_at_30_fails_as_a_frame_rate_too_low(kinematics, tmp_path, capsys):
    """The jump segment resampled to 60 fps and read at the CSV's default 30: flights twice as long,
    the root curving down at a quarter of its rate."""
    path = save_motion_csv(at_twice_the_rate(load_motion(real(JUMP))), tmp_path / "jump_60fps.csv")
    found = failures(kinematics, path)
    assert any(f.startswith("frame rate: flights not ballistic") and "30 fps is too low" in f for f in found), found
    assert any(f.startswith("flight longer than a jump: both feet off the floor for 0.7") for f in found), found
    row = failed_check_row(str(path), capsys)
    assert "   30 " in row and "flights not ballistic" in row


@needs_data
def test_a_30_fps_file_read_at_60_fails_as_a_frame_rate_too_high(kinematics, capsys):
    """The jump and run segments read at fps=60: the root falls at over twice gravity."""
    for segment in (JUMP, "run1_subject2.csv@61:76"):
        found = failures(kinematics, f"{real(segment)},fps=60")
        assert any(f.startswith("frame rate: the root falls faster than gravity") and "60 fps is too high" in f
                   for f in found), (segment, found)
    assert "falls faster than gravity" in failed_check_row(f"{real(JUMP)},fps=60", capsys)


@needs_data
@pytest.mark.parametrize("segment", ["run1_subject2.csv@61:76", JUMP, "fight1_subject2.csv@204:219",
                                     "dance1_subject1.csv@37:52", "walk1_subject1.csv@88:103"])
def test_a_root_quaternion_in_the_other_order_fails_as_root_orientation(kinematics, tmp_path, segment):
    """Each named segment written with its root quaternion as w x y z in the x y z w columns, and the
    reverse (x y z w read as w x y z, as a file in the other convention is): the pelvis lies tilted."""
    motion = load_motion(real(segment))
    wxyz = write_quat_wxyz(motion, tmp_path / "wxyz.csv")
    xyzw_read_as_wxyz = save_motion_csv(replace(motion, root_quat=motion.root_quat[:, [1, 2, 3, 0]]),
                                        tmp_path / "shifted.csv")
    for path in (wxyz, xyzw_read_as_wxyz):
        found = failures(kinematics, path)
        assert any(f.startswith("root orientation: the pelvis is more than 60 deg from upright") for f in found), found
    assert failures(kinematics, real(segment)) == []


@needs_data
def test_a_long_retargeting_float_fails_as_a_flight_longer_than_a_jump(kinematics, tmp_path, capsys):
    """A take whose root floats 8 cm up for 26.5 s (feet off the floor, the pose unchanged)."""
    motion = load_motion(real("walk1_subject1.csv@80:120"))
    root = motion.root_pos.copy()
    root[150:150 + int(26.5 * LAFAN1_FPS), 2] += 0.08
    path = save_motion_csv(replace(motion, root_pos=root), tmp_path / "float.csv")
    found = failures(kinematics, path)
    assert any(f.startswith("flight longer than a jump: both feet off the floor for 26.5") and "from 5.00 s" in f
               and "float" in f for f in found), found
    assert "flight longer than a jump" in failed_check_row(str(path), capsys)


@needs_data
def test_named_segments_still_pass(kinematics):
    for segment in ("run1_subject2.csv@61:76", JUMP, "fight1_subject2.csv@204:219", "dance1_subject1.csv@37:52",
                    "walk1_subject1.csv@88:103"):
        report = check_file_motion(segment, load_motion(real(segment)), kinematics)
        assert report.failures() == [], (segment, report.failures())
        assert report.tilted_fraction == 0.0 and 0.2 * 9.81 < report.root_fall_accel < 0.9 * 9.81


@pytest.mark.parametrize("name", BUILTIN_MOTIONS)
def test_builtin_motions_pass_as_files_and_fail_read_wrongly(kinematics, builtin_files, tmp_path, name):
    """Each built-in motion as a file passes; read at 60 fps it falls faster than gravity (those with
    a root that drops: run and jump); written with its quaternion as w x y z it lies tilted; the
    jump at twice its rate read at 30 has flights that are not ballistic."""
    (path,) = [p for p in builtin_files if p.stem == name]
    assert failures(kinematics, path) == []
    fast = failures(kinematics, f"{path},fps=60")
    if name in ("synthetic_run", "synthetic_jump"):
        assert any(f.startswith("frame rate: the root falls faster than gravity") for f in fast), fast
    found = failures(kinematics, write_quat_wxyz(load_motion(path), tmp_path / "wxyz.csv"))
    assert any(f.startswith("root orientation:") for f in found), found
    if name == "synthetic_jump":
        slow = save_motion_csv(at_twice_the_rate(load_motion(path)), tmp_path / "slow.csv")
        found = failures(kinematics, slow)
        assert any(f.startswith("frame rate: flights not ballistic") for f in found), found
