"""The built-in synthetic motions: planted feet on the floor, joints inside their limits, continuous,
ballistic in flight, no self-collision, plausible speeds; deterministic; written as LAFAN1 CSV."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bcg.motion import LAFAN1_FPS, load_motion
from bcg.robot import RobotDescription
from bcg_train.motion.checks import check_builtin
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import BUILTIN_MOTIONS, load_clip, write_builtin_motions
from bcg_train.motion.synthetic import synthesize_builtin
from bcg_train.motion.synthetic.choreography import Choreography, Stance

SHARED = Path(__file__).resolve().parents[3] / "shared" / "robots" / "unitree_g1"


@pytest.fixture(scope="module")
def kinematics():
    return RobotKinematics(RobotDescription.load(SHARED / "scene_29dof.xml"))


@pytest.mark.parametrize("name", BUILTIN_MOTIONS)
def test_builtin_motion_passes_its_checks(kinematics, name):
    report = check_builtin(name, kinematics)
    assert report.failures() == []
    assert report.frames == 751 and report.fps == 50.0                      # 15 s at the control rate
    assert report.stance_height_error_m < 0.002 and report.swing_min_height_m > -0.001
    assert report.limit_margin_rad > 0.05 and report.self_penetration_m < 0.01
    assert report.max_joint_step_rad * report.fps < 20.0                       # no jumps in q
    if name == "synthetic_run":
        assert 2.0 <= report.max_root_speed <= 3.0 and report.flight_frames > 50
    if name == "synthetic_jump":
        assert 0.25 <= report.root_apex_m <= 0.35 and report.flight_frames > 50
    if name in ("synthetic_run", "synthetic_jump"):
        assert report.flight_accel_error < 1e-6                                 # z'' = -g in flight


def test_builtin_motions_are_deterministic(kinematics):
    a = synthesize_builtin("synthetic_fight", kinematics, duration_s=5.0).motion
    b = synthesize_builtin("synthetic_fight", kinematics, duration_s=5.0).motion
    c = synthesize_builtin("synthetic_fight", kinematics, duration_s=5.0, seed=1).motion
    assert a.num_frames == 151 and a.fps == LAFAN1_FPS
    np.testing.assert_array_equal(a.joint_pos, b.joint_pos)
    assert not np.allclose(a.joint_pos, c.joint_pos)
    with pytest.raises(ValueError, match=r"no built-in motion 'run'; built-in: \['synthetic_run', 'synthetic_jump', "
                                         r"'synthetic_fight', 'synthetic_dance'\]"):
        synthesize_builtin("run", kinematics)
    for name, shortest in (("synthetic_run", "2.67"), ("synthetic_jump", "2.96")):    # too short: said so
        with pytest.raises(ValueError, match=rf"duration_s: 1.0 s is too short .*\({shortest} s\)"):
            synthesize_builtin(name, kinematics, duration_s=1.0)
    assert synthesize_builtin("synthetic_run", kinematics, duration_s=2.67).motion.num_frames == 81


def test_written_csv_is_labelled_and_loads_unchanged(kinematics, tmp_path):
    (path,) = write_builtin_motions(tmp_path, kinematics, ["synthetic_jump"], duration_s=4.0)
    assert path.name == "synthetic_jump.csv" and "Synthetic" in (tmp_path / "README.md").read_text()
    assert sorted(os.listdir(tmp_path)) == ["README.md", "synthetic_jump.csv"]
    written = load_motion(path)
    memory = synthesize_builtin("synthetic_jump", kinematics, duration_s=4.0).motion
    np.testing.assert_allclose(written.joint_pos, memory.joint_pos, atol=1e-11)
    np.testing.assert_allclose(written.root_pos, memory.root_pos, atol=1e-11)
    clip = load_clip(path, kinematics)                 # a file goes through the same path as a user's CSV
    assert clip.num_frames == 201 and clip.name == str(path)
    heights = kinematics.foot_sphere_heights(clip.root_pos[:10], clip.root_quat[:10], clip.joint_pos[:10])
    assert all(np.abs(h).max() < 1e-9 for h in heights.values())       # standing: feet flat on the floor


def test_choreography_rejects_overlapping_stances():
    feet = {"left": (Stance(-1, 2, 0, 0.1, 0), Stance(1.5, 9, 0.2, 0.1, 0)), "right": (Stance(-1, 9, 0, -0.1, 0),)}
    with pytest.raises(ValueError, match="left foot: stances .* overlap"):
        Choreography(5.0, feet, None, None, {})


def test_preview_renders_a_contact_sheet(tmp_path):
    out = tmp_path / "jump.png"
    env = dict(os.environ, BCG_G1_MODEL=str(SHARED / "scene_29dof.xml"))
    env.pop("MUJOCO_GL", None)
    command = [sys.executable, "-m", "bcg_train.motion", "preview", "synthetic_jump", "-o", str(out), "--fps", "0.5"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    from PIL import Image
    with Image.open(out) as image:
        assert image.size == (6 * 320, 2 * 240)          # 8 pictures (every 2 s of 15 s), 6 per row
        assert len(np.unique(np.asarray(image.convert("L")))) > 20   # something was drawn
