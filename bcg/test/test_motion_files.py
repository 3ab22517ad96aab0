"""The motion loader: LAFAN1 CSV and BeyondMimic / mjlab npz, mapped by joint name, with precise errors;
time windows, CSV frame rates, npz joint orders, velocity-spike repair; no onnx."""
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

from bcg.motion import (
    LAFAN1_FPS,
    JointLimits,
    JointLimitWarning,
    MotionFileError,
    MotionSource,
    ReferenceMotion,
    load_motion,
    save_motion_csv,
)
from bcg.motion.files import ISAACLAB_G1_JOINT_NAMES
from bcg.motion.reference import quat_slerp
from bcg.motion.spikes import find_spikes, remove_spikes
from bcg.robot import SDK_JOINT_NAMES, RobotDescription
from bcg.rotations import heading, projected_gravity, turned_about_vertical

SHARED = Path(__file__).resolve().parents[3] / "shared" / "robots" / "unitree_g1"


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load(SHARED / "scene_29dof.xml")


def _yaw_quat(yaw):
    """(w x y z) of rotations about z by `yaw` (...,)."""
    yaw = np.asarray(yaw, float)
    return np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], -1)


def _motion(robot, frames=20, seed=0) -> ReferenceMotion:
    """A random motion inside the robot's limits, joints in SDK order."""
    rng = np.random.default_rng(seed)
    q = robot.q_lower + (robot.q_upper - robot.q_lower) * rng.uniform(0.1, 0.9, (frames, robot.num_joints))
    root = np.column_stack([np.linspace(0, 1, frames), rng.normal(0, 0.1, frames), np.full(frames, 0.75)])
    return ReferenceMotion(LAFAN1_FPS, robot.joint_names, q, np.zeros_like(q), root,
                           _yaw_quat(np.linspace(0, 1, frames)))


def _write_csv(path, table):
    path.write_text("\n".join(",".join(repr(float(v)) for v in row) for row in table) + "\n")
    return path


def _table(robot, frames=5):
    table = np.zeros((frames, 36))
    table[:, 2] = 0.75
    table[:, 6] = 1.0
    table[:, 7:] = robot.default_q
    return table


def test_csv_round_trip_is_exact(robot, tmp_path):
    motion = _motion(robot)
    path = save_motion_csv(motion, tmp_path / "m.csv")
    back = load_motion(path, limits=JointLimits.of(robot))
    assert back.fps == LAFAN1_FPS and back.joint_names == SDK_JOINT_NAMES
    for field in ("joint_pos", "root_pos", "root_quat"):
        np.testing.assert_allclose(getattr(back, field), getattr(motion, field), rtol=0, atol=1e-11)
    lines = path.read_text().splitlines()
    assert len(lines) == 20 and all(len(line.split(",")) == 36 for line in lines)
    # quaternion stored x y z w in columns 4-7
    np.testing.assert_allclose(np.array(lines[-1].split(","), float)[3:7], motion.root_quat[-1, [1, 2, 3, 0]])


def test_save_is_atomic(robot, tmp_path, monkeypatch):
    path = save_motion_csv(_motion(robot), tmp_path / "m.csv")
    before = path.read_bytes()

    def broken_savetxt(f, *args, **kwargs):
        f.write(b"0,1,2\n")
        raise OSError("disk full")
    monkeypatch.setattr(np, "savetxt", broken_savetxt)
    with pytest.raises(OSError, match="disk full"):
        save_motion_csv(_motion(robot, seed=1), path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["m.csv"]


def test_isaaclab_order_is_breadth_first_over_the_model():
    m = mujoco.MjModel.from_xml_path(str(SHARED / "g1_29dof.xml"))
    order, level = [], [1]   # body 1: the pelvis
    while level:
        children = [b for parent in level for b in range(m.nbody) if b != parent and m.body_parentid[b] == parent]
        order += [m.joint(m.body_jntadr[b]).name for b in children if m.body_jntnum[b]]
        level = children
    assert tuple(order) == ISAACLAB_G1_JOINT_NAMES


def test_beyondmimic_npz_maps_isaaclab_order_by_name(robot, tmp_path):
    motion = _motion(robot, frames=12)
    isaac = motion.joint_index(ISAACLAB_G1_JOINT_NAMES)
    bodies = 30
    body_pos = np.zeros((12, bodies, 3))
    body_pos[:, 0] = motion.root_pos
    body_pos[:, 1:] = 5.0   # other bodies: never read as the root
    body_quat = np.tile([1.0, 0, 0, 0], (12, bodies, 1))
    body_quat[:, 0] = motion.root_quat
    path = tmp_path / "bm.npz"
    np.savez(path, fps=np.array([50]), joint_pos=motion.joint_pos[:, isaac], joint_vel=motion.joint_pos[:, isaac] * 2,
             body_pos_w=body_pos, body_quat_w=body_quat, body_lin_vel_w=np.zeros((12, bodies, 3)),
             body_ang_vel_w=np.zeros((12, bodies, 3)))
    back = load_motion(path, limits=JointLimits.of(robot))
    assert back.fps == 50 and back.joint_names == ISAACLAB_G1_JOINT_NAMES
    cols = back.joint_index(SDK_JOINT_NAMES)
    np.testing.assert_array_equal(back.joint_pos[:, cols], motion.joint_pos)
    np.testing.assert_array_equal(back.joint_vel[:, cols], 2 * motion.joint_pos)   # the file's velocities
    np.testing.assert_allclose(back.root_pos, motion.root_pos)
    np.testing.assert_allclose(back.root_quat, motion.root_quat)
    # an mjlab file: the same arrays in SDK order, which the option says (nothing in the file does)
    np.savez(path, fps=50.0, joint_pos=motion.joint_pos, body_pos_w=body_pos, body_quat_w=body_quat)
    back = load_motion(f"{path},joint_order=sdk", limits=JointLimits.of(robot))
    assert back.joint_names == SDK_JOINT_NAMES
    np.testing.assert_array_equal(back.joint_pos, motion.joint_pos)
    np.testing.assert_allclose(back.joint_vel[5], (motion.joint_pos[6] - motion.joint_pos[4]) * 25)   # central diff.
    # read in the default (Isaac Lab) order, the same file scrambles the joints: the limit check says
    # so and names the option
    with pytest.raises(MotionFileError, match=r"joint-limit violation.*no joint_names array and was read in Isaac "
                                              r"Lab order.*FILE.npz,joint_order=sdk"):
        load_motion(path, limits=JointLimits.of(robot))


def test_own_npz_with_names(robot, tmp_path):
    motion = _motion(robot, frames=6)
    path = tmp_path / "own.npz"
    np.savez(path, fps=30.0, joint_pos=motion.joint_pos[:, :3], joint_names=np.array(SDK_JOINT_NAMES[:3]),
             root_pos=motion.root_pos, root_quat=motion.root_quat)
    back = load_motion(path)
    assert back.joint_names == SDK_JOINT_NAMES[:3]
    np.testing.assert_array_equal(back.joint_pos, motion.joint_pos[:, :3])


def test_quaternions_are_sign_aligned_and_slerped(robot, tmp_path):
    table = _table(robot, frames=3)
    quats = _yaw_quat([0.0, np.pi / 2, np.pi])       # w x y z
    quats[1] *= -1                                    # same rotation, other hemisphere
    table[:, 3:7] = quats[:, [1, 2, 3, 0]]
    motion = load_motion(_write_csv(tmp_path / "q.csv", table))
    assert np.all(np.sum(motion.root_quat[1:] * motion.root_quat[:-1], -1) > 0)
    frames = motion.sample(np.array([0.5 / LAFAN1_FPS, 1.25 / LAFAN1_FPS]), np.arange(29))
    np.testing.assert_allclose(frames.root_quat[0], _yaw_quat(np.pi / 4))
    np.testing.assert_allclose(frames.root_quat[1], _yaw_quat(np.pi * 5 / 8))
    np.testing.assert_allclose(quat_slerp(_yaw_quat(0.2), -_yaw_quat(0.2), 0.3), _yaw_quat(0.2))


def test_a_turned_motion_turns_its_root_about_the_first_frame_and_keeps_roll_pitch_and_joints(robot):
    m = _motion(robot)
    tilted = turned_about_vertical(np.array([np.cos(0.1), np.sin(0.1), 0, 0]), np.linspace(0, 1, m.num_frames))
    m = dataclasses.replace(m, root_quat=tilted)                       # rolled by 0.2 rad, heading 0..1 rad
    t = m.turned(2.0)
    np.testing.assert_allclose(np.angle(np.exp(1j * (heading(t.root_quat) - heading(m.root_quat)))), 2.0, atol=1e-12)
    np.testing.assert_allclose(projected_gravity(t.root_quat), projected_gravity(m.root_quat), atol=1e-12)
    np.testing.assert_array_equal(t.joint_pos, m.joint_pos)
    np.testing.assert_allclose(t.root_pos[0], m.root_pos[0])                          # turned about the start
    step, turned_step = m.root_pos[5] - m.root_pos[0], t.root_pos[5] - t.root_pos[0]
    np.testing.assert_allclose(turned_step, [np.cos(2) * step[0] - np.sin(2) * step[1],
                                             np.sin(2) * step[0] + np.cos(2) * step[1], step[2]], atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(t.root_lin_vel, axis=1), np.linalg.norm(m.root_lin_vel, axis=1))


@pytest.mark.parametrize("edit, message", [
    (lambda t: t[:, :35], r"line 1 has 35 columns, expected 36 \(root x y z, quaternion x y z w, 29 joints"),
    (lambda t: t.__setitem__((3, 10), np.nan), r"line 4, column 11 \(left_knee_joint\): nan is not finite"),
    (lambda t: t.__setitem__((2, 1), np.inf), r"line 3, column 2 \(root_y\): inf is not finite"),
    (lambda t: t.__setitem__((1, 6), 0.9), r"line 2: root quaternion columns 4-7 \(x y z w\) has norm 0.9, not "
                                           r"within 0.001 of 1 \(1 frame"),
    (lambda t: t[:1], r"1 frame\(s\), at least 2 needed"),
])
def test_csv_errors_name_line_and_column(robot, tmp_path, edit, message):
    table = _table(robot)
    edited = edit(table)
    table = table if edited is None else edited
    path = _write_csv(tmp_path / "bad.csv", table)
    with pytest.raises(MotionFileError, match=message) as e:
        load_motion(path)
    assert str(path) in str(e.value)


def test_csv_text_errors(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(("0," * 35 + "0\n") * 2 + "0," * 20 + "abc," + "0," * 14 + "0\n")
    with pytest.raises(MotionFileError, match=r"line 3, column 21 \(waist_roll_joint\): 'abc' is not a number"):
        load_motion(path)
    with pytest.raises(MotionFileError, match="does not exist"):
        load_motion(tmp_path / "none.csv")
    (tmp_path / "m.bvh").write_text("x")
    with pytest.raises(MotionFileError, match=r"unknown format '.bvh'"):
        load_motion(tmp_path / "m.bvh")


def test_joint_limit_violations_are_reported_or_clipped(robot, tmp_path):
    table = _table(robot, frames=6)
    knee = 7 + SDK_JOINT_NAMES.index("left_knee_joint")
    table[2:4, knee] = robot.q_upper[3] + np.array([0.05, 0.2])
    table[5, 7 + 5] = robot.q_lower[5] - 0.01            # left ankle roll
    path = _write_csv(tmp_path / "lim.csv", table)
    limits = JointLimits.of(robot)
    with pytest.raises(MotionFileError) as e:
        load_motion(path, limits=limits)
    msg = str(e.value)
    assert "left_knee_joint above the upper limit by up to 0.2000 rad at line 4 (2 frame(s), first at line 3" in msg
    assert "left_ankle_roll_joint below the lower limit by up to 0.0100 rad at line 6" in msg
    assert "clip_to_limits=True" in msg
    with pytest.warns(JointLimitWarning, match="left_knee_joint above the upper limit"):
        clipped = load_motion(path, limits=limits, clip_to_limits=True)
    assert clipped.joint_pos[3, 3] == robot.q_upper[3] and clipped.joint_pos[5, 5] == robot.q_lower[5]
    assert load_motion(path).joint_pos[3, 3] == pytest.approx(robot.q_upper[3] + 0.2)   # no limits: no check


def test_npz_errors(robot, tmp_path):
    motion = _motion(robot, frames=4)
    path = tmp_path / "bad.npz"
    np.savez(path, fps=30.0, joint_pos=motion.joint_pos)
    with pytest.raises(MotionFileError, match=r"missing array\(s\) \['joint_names', 'root_pos', 'root_quat'\]"):
        load_motion(path)
    names = np.array(("left_knee_joint", "tail_joint"))
    np.savez(path, fps=30.0, joint_pos=motion.joint_pos[:, :2], joint_names=names, root_pos=motion.root_pos,
             root_quat=motion.root_quat)
    with pytest.raises(MotionFileError, match=r"unknown joint name\(s\) \['tail_joint'\]"):
        load_motion(path)
    np.savez(path, fps=30.0, joint_pos=motion.joint_pos[:, :2], joint_names=np.array(("left_knee_joint",) * 2),
             root_pos=motion.root_pos, root_quat=motion.root_quat)
    with pytest.raises(MotionFileError, match=r"joint name\(s\) \['left_knee_joint'\] appear more than once"):
        load_motion(path)
    np.savez(path, fps=30.0, joint_pos=motion.joint_pos, joint_names=np.array(SDK_JOINT_NAMES[:28]),
             root_pos=motion.root_pos, root_quat=motion.root_quat)
    with pytest.raises(MotionFileError, match=r"joint_pos has shape \(4, 29\), expected \(4, 28\) \(28 joint names\)"):
        load_motion(path)
    bad_vel = motion.joint_pos.copy()
    bad_vel[2, 4] = np.nan
    np.savez(path, fps=50.0, joint_pos=motion.joint_pos, joint_vel=bad_vel,
             body_pos_w=motion.root_pos[:, None], body_quat_w=motion.root_quat[:, None])
    with pytest.raises(MotionFileError, match=r"frame 2, joint_vel column 4 \(right_hip_roll_joint\): nan"):
        load_motion(path)
    np.savez(path, fps=50.0, joint_pos=motion.joint_pos, body_pos_w=motion.root_pos[:, None],
             body_quat_w=2 * motion.root_quat[:, None])
    with pytest.raises(MotionFileError, match=r"frame 0: root quaternion \(w x y z\) has norm 2"):
        load_motion(path)
    np.savez(path, fps=-1.0, joint_pos=motion.joint_pos, body_pos_w=motion.root_pos[:, None],
             body_quat_w=motion.root_quat[:, None])
    with pytest.raises(MotionFileError, match="fps .* is not one number of 1-1000 frames/s"):
        load_motion(path)


def test_importing_the_loader_does_not_load_onnx():
    code = ("import sys; import bcg.motion, bcg.motion.segments, bcg.motion.spikes; "
            "print('onnx' in sys.modules, 'bcg.contract' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_source_string_form():
    src = MotionSource.parse("takes/run.csv@61:76.5,fps=120,despike=35")
    assert src == MotionSource(Path("takes/run.csv"), 61.0, 76.5, fps=120.0, despike_rad_s=35.0)
    assert str(src) == "takes/run.csv@61:76.5,fps=120,despike=35"
    assert MotionSource.parse(str(src)) == src
    assert MotionSource.parse("m.npz,joint_order=sdk") == MotionSource(Path("m.npz"), joint_order="sdk")
    assert MotionSource.parse("a.csv@10:") == MotionSource(Path("a.csv"), 10.0, None)
    assert MotionSource.parse("a.csv@:5").end_s == 5.0 and MotionSource.parse("a.csv").start_s is None
    for spec, message in (("a.csv@5:2", r"end 2 s is not after start 5 s"),
                          ("a.csv@x:2", r"start 'x' is not a number \(PATH\[@START:END\]"),
                          ("a.csv,speed=3", r"^motion 'a.csv,speed=3': 'speed=3': unknown option; expected fps=HZ, "
                                            r"joint_order=sdk\|isaaclab or despike=RAD_S, e.g. fps=120$"),
                          ("a.csv,fps", r"^motion 'a.csv,fps': 'fps': no '='; expected KEY=VALUE, e.g. fps=120$"),
                          ("a.csv,=3", r"^motion 'a.csv,=3': '=3': an empty key or key part; expected KEY=VALUE, "
                                       r"e.g. fps=120$"),
                          ("a.csv,fps.x=3", r"'fps.x=3': unknown option; expected fps=HZ"),
                          ("a.csv,fps=fast", r"fps 'fast' is not a number"),
                          ("a.csv,fps=0", r"fps 0 must be > 0"),
                          ("a.npz,joint_order=mujoco", r"joint_order 'mujoco' is not one of sdk, isaaclab")):
        with pytest.raises(MotionFileError, match=message):
            MotionSource.parse(spec)


def test_a_source_is_labelled_by_its_stem_and_window():
    assert MotionSource.parse("takes/run1_subject2.csv@61:76").label == "run1_subject2_61-76"
    assert MotionSource.parse("a/jumps.csv@5.5:20.5,fps=60").label == "jumps_5p5-20p5"
    assert MotionSource.parse("take.csv@10:").label == "take_10-end"
    assert MotionSource.parse("take.npz").label == "take"


def test_a_file_whose_name_looks_like_options_is_that_file(robot, tmp_path):
    path = save_motion_csv(_motion(robot, frames=4), tmp_path / "take.csv,v2.csv")
    assert MotionSource.parse(str(path)) == MotionSource(path)
    assert load_motion(str(path)).num_frames == 4
    with pytest.raises(MotionFileError, match="'v2.csv': no '='; expected KEY=VALUE"):
        load_motion(str(tmp_path / "other.csv,v2.csv"))


def test_time_window_keeps_frames_and_file_line_numbers(robot, tmp_path):
    table = _table(robot, frames=31)                       # 1 s at 30 frames/s
    table[:, 0] = np.arange(31) / 30.0                     # root x = time
    knee = 7 + SDK_JOINT_NAMES.index("left_knee_joint")
    table[25, knee] = robot.q_upper[3] + 0.1               # line 26, t = 25/30 s
    path = _write_csv(tmp_path / "w.csv", table)
    limits = JointLimits.of(robot)
    window = load_motion(f"{path}@0.2:0.5", limits=limits)   # the violation is outside: no error
    np.testing.assert_allclose(window.root_pos[:, 0], np.arange(6, 16) / 30.0)   # t = 6/30 .. 15/30 s
    assert window.duration_s == pytest.approx(0.3)
    assert load_motion(MotionSource(path, start_s=0.9)).num_frames == 4           # to the end
    with pytest.raises(MotionFileError, match=r"left_knee_joint above the upper limit by up to 0.1000 rad at line 26"):
        load_motion(f"{path}@0.5:", limits=limits)
    with pytest.raises(MotionFileError, match=rf"{path}: end 1.5 s is past the end of the file \(1 s: 31 frames"):
        load_motion(f"{path}@0.5:1.5")
    with pytest.raises(MotionFileError, match=r"1 frame\(s\), at least 2 needed"):
        load_motion(f"{path}@0.5:0.52")


def test_csv_frame_rate_option(robot, tmp_path):
    table = _table(robot, frames=13)
    table[:, 7] = np.linspace(0.0, 0.12, 13)                 # left hip pitch, 0.01 rad per frame
    path = _write_csv(tmp_path / "fast.csv", table)
    at_30, at_120 = load_motion(path), load_motion(f"{path},fps=120")
    assert at_30.fps == 30 and at_120.fps == 120 and at_120.duration_s == pytest.approx(0.1)
    np.testing.assert_allclose(at_30.joint_vel[:, 0], 0.3)
    np.testing.assert_allclose(at_120.joint_vel[:, 0], 1.2)
    assert load_motion(f"{path}@0.05:,fps=120").num_frames == 7   # the window is in the file's own time
    with pytest.raises(MotionFileError, match=r"joint_order=isaaclab: a LAFAN1 CSV is always in SDK order"):
        load_motion(f"{path},joint_order=isaaclab")


def test_npz_joint_order_option_errors(robot, tmp_path):
    motion = _motion(robot, frames=5)
    named = tmp_path / "named.npz"
    np.savez(named, fps=30.0, joint_pos=motion.joint_pos, joint_names=np.array(SDK_JOINT_NAMES),
             root_pos=motion.root_pos, root_quat=motion.root_quat)
    with pytest.raises(MotionFileError, match=r"joint_order=sdk, but the file names its joints"):
        load_motion(f"{named},joint_order=sdk")
    with pytest.raises(MotionFileError, match=r"fps=60: an npz states its own frame rate"):
        load_motion(f"{named},fps=60")
    own = tmp_path / "own.npz"                               # this suite's layout without names
    np.savez(own, fps=30.0, joint_pos=motion.joint_pos, root_pos=motion.root_pos, root_quat=motion.root_quat)
    with pytest.raises(MotionFileError, match=r"missing array\(s\) \['joint_names'\]"):
        load_motion(own)
    back = load_motion(f"{own},joint_order=sdk")
    assert back.joint_names == SDK_JOINT_NAMES
    np.testing.assert_array_equal(back.joint_pos, motion.joint_pos)


def _smooth_joint(frames=60, fps=30.0):
    """(T,) rad: a 1 Hz sine of 0.3 rad (at most 1.9 rad/s)."""
    return 0.3 * np.sin(2 * np.pi * np.arange(frames) / fps)


def test_spikes_are_found_and_repaired():
    fps = 30.0
    truth = np.stack([_smooth_joint(), np.cos(np.arange(60) / 10.0), np.zeros(60)], axis=1)
    q = truth.copy()
    q[20, 0] += 4.0                  # a one-frame outlier: 120 rad/s in and out
    q[40:42, 1] -= 3.0               # a two-frame outlier
    q[30:, 2] += 2.0                 # a step: 60 rad/s once
    names = ("a", "b", "c")
    spikes = find_spikes(q, fps, names, threshold=35.0)
    assert [(s.joint, s.frame) for s in spikes] == [("a", 19), ("a", 20), ("c", 29), ("b", 39), ("b", 41)]
    assert spikes[0].speed == pytest.approx(120.0 + (truth[20, 0] - truth[19, 0]) * fps)
    repaired, replaced = remove_spikes(q, fps, names, threshold=35.0)
    assert find_spikes(repaired, fps, names, threshold=35.0) == []
    assert np.flatnonzero(replaced[:, 0]).tolist() == [20]        # the outlier alone, by interpolation
    assert abs(repaired[20, 0] - truth[20, 0]) < 0.01
    assert np.abs(repaired[:, 1] - truth[:, 1]).max() < 0.05 and replaced[:, 1].sum() <= 4
    assert np.array_equal(repaired[~replaced], q[~replaced])      # nothing else touched
    assert 0 < replaced[:, 2].sum() <= 4                          # the step: spread over a few frames
    assert find_spikes(q, fps, names, threshold=150.0) == []


def test_despike_option_repairs_before_the_limit_check(robot, tmp_path):
    table = _table(robot, frames=30)
    col = SDK_JOINT_NAMES.index("left_shoulder_pitch_joint")
    table[:, 7 + col] = _smooth_joint(30)
    table[12, 7 + col] = robot.q_upper[15] + 0.5          # a retargeting glitch past the limit
    path = _write_csv(tmp_path / "spike.csv", table)
    limits = JointLimits.of(robot)
    with pytest.raises(MotionFileError, match=r"left_shoulder_pitch_joint above the upper limit .* at line 13"):
        load_motion(path, limits=limits)
    fixed = load_motion(f"{path},despike=35", limits=limits)
    assert abs(fixed.joint_pos[12, col] - _smooth_joint(30)[12]) < 0.01
    assert np.abs(fixed.joint_vel[:, col]).max() < 3.0
    npz = tmp_path / "spike.npz"                          # file velocities: recomputed where repaired
    vel = np.zeros((30, 29))
    vel[:, col] = 99.0
    np.savez(npz, fps=30.0, joint_pos=table[:, 7:], joint_vel=vel, joint_names=np.array(SDK_JOINT_NAMES),
             root_pos=table[:, :3], root_quat=table[:, [6, 3, 4, 5]])
    fixed = load_motion(f"{npz},despike=35")
    assert fixed.joint_vel[0, col] == 99.0 and abs(fixed.joint_vel[12, col]) < 3.0
