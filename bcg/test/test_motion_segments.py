"""Named segments of real motion capture (config/motions.yaml) and the motion folder (flag, then
$BCG_MOTION_DIR); on the shared LAFAN1 G1 data when it is there."""
import os
from pathlib import Path

import numpy as np
import pytest

from bcg.motion import JointLimits, MotionDirNotFoundError, MotionFileError, MotionSource, load_motion
from bcg.motion.segments import ENV_VAR, named_segments, resolve_motion_dir, segment_source
from bcg.motion.spikes import find_spikes
from bcg.robot import RobotDescription

PAPER_MOTIONS = ("run", "jump", "fight", "dance")


def _motion_dir():
    value = os.environ.get(ENV_VAR)
    return Path(value) if value and Path(value).is_dir() else None


needs_data = pytest.mark.skipif(
    _motion_dir() is None, reason=f"no LAFAN1 G1 motion folder: set {ENV_VAR} (tools/test.sh and .ci/run point it at "
                                  "../shared/motions/lafan1_g1 beside the checkout)")


def test_config_names_a_15_s_segment_of_each_paper_motion():
    segments = named_segments()
    assert set(PAPER_MOTIONS) <= set(segments)
    for name, segment in segments.items():
        assert segment.end_s - segment.start_s == 15.0, name
        assert segment.file.endswith(".csv") and len(segment.why) > 80, name


@pytest.mark.parametrize("text, message", [
    ("motions: []", r"expected a mapping `motions:`"),
    ("motions:\n  run: {file: a.csv, start_s: 1, end_s: 2}", r"motions.run: has \['end_s', 'file', 'start_s'\], "
                                                            r"expected exactly \['file', 'start_s', 'end_s', 'why'\]"),
    ("motions:\n  run: {file: a.csv, start_s: one, end_s: 2, why: w}", r"motions.run.start_s: 'one' is not a number"),
    ("motions:\n  run: {file: a.csv, start_s: 3, end_s: 2, why: w}", r"motions.run: start_s 3 and end_s 2 do not make"),
    ("motions:\n  run: {file: '', start_s: 1, end_s: 2, why: w}", r"motions.run.file: expected a non-empty string"),
    ("motions: {run: [", r"cannot be read \(ParserError"),
])
def test_malformed_config_names_file_and_key(tmp_path, text, message):
    path = tmp_path / "motions.yaml"
    path.write_text(text)
    with pytest.raises(MotionFileError, match=message) as e:
        named_segments(path)
    assert str(path) in str(e.value)


def test_motion_dir_from_flag_then_environment(tmp_path, monkeypatch):
    flag, env = tmp_path / "flag", tmp_path / "env"
    flag.mkdir()
    env.mkdir()
    monkeypatch.setenv(ENV_VAR, str(env))
    assert resolve_motion_dir(flag) == flag and resolve_motion_dir() == env
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(MotionDirNotFoundError, match=rf"\${ENV_VAR} names .*missing, which is not a folder"):
        resolve_motion_dir()
    with pytest.raises(MotionDirNotFoundError, match=r"--motion-dir names .*nope, which is not a folder"):
        resolve_motion_dir(tmp_path / "nope")


def test_a_named_segment_without_data_says_how_to_give_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(MotionDirNotFoundError) as e:
        segment_source("jump")
    message = str(e.value)
    assert "motion 'jump' is jumps1_subject1.csv" in message and "config/motions.yaml" in message
    assert "--motion-dir" in message and ENV_VAR in message
    (tmp_path / "walk1_subject1.csv").write_text("")
    with pytest.raises(MotionFileError, match=r"run1_subject2.csv does not exist \(the motion folder holds "
                                              r"walk1_subject1.csv\)"):
        segment_source("run", tmp_path)


@needs_data
@pytest.mark.parametrize("name", list(named_segments()))
def test_real_segment_loads_within_limits_and_without_spikes(name):
    source = segment_source(name)
    segment = named_segments()[name]
    assert source == MotionSource(_motion_dir() / segment.file, segment.start_s, segment.end_s)
    motion = load_motion(source, limits=JointLimits.of(RobotDescription.load()))   # raises on a limit violation
    assert motion.fps == 30.0 and motion.num_frames == 451 and motion.duration_s == pytest.approx(15.0)
    assert find_spikes(motion.joint_pos, motion.fps, motion.joint_names) == []
    speed = np.abs(np.diff(motion.joint_pos, axis=0)).max() * motion.fps
    assert 5.0 < speed < 20.0                                # moving, far from a spike
    assert motion.root_pos[:, 2].min() > 0.5                 # upright: well above the 0.3 m fall height
