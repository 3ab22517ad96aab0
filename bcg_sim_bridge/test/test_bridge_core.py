"""Unit tests of the bridge's pure core: real MuJoCo, real wire records, no DDS."""
import dataclasses
import os
import threading
from pathlib import Path

import mujoco
import numpy as np
import pytest

from bcg.config_check import ConfigError
from bcg.contract.builtin import stand_gains
from bcg.motion import MotionFileError, load_motion
from bcg.mujoco_plant import JointCommand, PhysicsCore
from bcg.robot import SDK_JOINT_NAMES, RobotDescription, resolve_model_path
from bcg.ros_params import read_ros_parameters
from bcg.transport.latest import LatestSampleReader
from bcg.wire import LOWCMD, crc_ok, encode_lowcmd, encode_lowstate, new_lowcmd
from bcg_sim_bridge.bridge import SimBridge
from bcg_sim_bridge.command_gate import CommandGate
from bcg_sim_bridge.config import NODE_NAME, BridgeConfig, load_config
from bcg_sim_bridge.display import GIF_COLOURS, Recorder, write_gif
from bcg_sim_bridge.elastic_band import ElasticBand
from bcg_sim_bridge.lowstate_fill import quat_to_rpy
from bcg_sim_bridge.metrics import RunMetrics, write_json_atomic
from bcg_sim_bridge.runner import tracked_motion

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


@pytest.fixture(scope="module")
def robot23():
    path = resolve_model_path().parent / "scene_23dof.xml"
    if not path.is_file():
        pytest.skip(f"no 23-DoF model beside {resolve_model_path()}")
    return RobotDescription.load(path)


def valid_lowcmd(robot, kp=0.0, kd=0.0, tau=0.0, q=None, mode=1):
    """A LowCmd for every joint of `robot` with a correct CRC."""
    rec = new_lowcmd()
    rec["mode_machine"] = robot.mode_machine
    m = rec["motor_cmd"]
    s = robot.motor_slots
    m["mode"][s] = mode
    m["kp"][s], m["kd"][s], m["tau"][s] = kp, kd, tau
    if q is not None:
        m["q"][s] = q
    encode_lowcmd(rec)
    return rec


def test_pd_law_is_applied_in_every_physics_step_with_clamping(robot):
    core = PhysicsCore(robot, physics_hz=1000.0)
    assert core.model.opt.timestep == pytest.approx(1e-3)
    n = robot.num_joints
    rng = np.random.default_rng(0)
    enabled = np.ones(n, dtype=bool)
    enabled[3] = False
    cmd = JointCommand(enabled=enabled, q=robot.default_q + rng.uniform(-1, 1, n), dq=rng.uniform(-1, 1, n),
                       tau=rng.uniform(-3, 3, n), kp=np.full(n, 300.0), kd=np.full(n, 5.0))
    core.apply(cmd)
    clamped = 0
    for _ in range(50):  # one command, many physics steps: the law must follow q, dq every step
        q, dq = core.joint_q, core.joint_dq
        core.step()
        raw = cmd.tau + cmd.kp * (cmd.q - q) + cmd.kd * (cmd.dq - dq)
        want = np.where(enabled, np.clip(raw, -robot.tau_limit, robot.tau_limit), 0.0)
        np.testing.assert_allclose(core.joint_torque, want, rtol=1e-9, atol=1e-9)
        clamped += int(np.sum(np.abs(raw[enabled]) > robot.tau_limit[enabled]))
    assert clamped > 0, "the test gains must drive some joints into their torque limit"
    assert core.joint_torque[3] == 0.0


def test_gate_rejects_bad_commands_and_never_applies_them(robot):
    gate = CommandGate(robot, timeout_s=0.1, damping_kd=2.0)
    good = valid_lowcmd(robot, tau=1.0)
    bad_crc = good.copy()
    bad_crc["crc"] ^= 1
    nan = valid_lowcmd(robot, tau=1.0)
    nan["motor_cmd"]["kd"][30] = np.nan  # even an unused slot
    encode_lowcmd(nan)
    wrong_machine = valid_lowcmd(robot, tau=1.0)
    wrong_machine["mode_machine"] = 4
    encode_lowcmd(wrong_machine)
    assert crc_ok(nan) and crc_ok(wrong_machine) and not crc_ok(bad_crc)
    for rec, reason in ((bad_crc, "crc"), (nan, "non_finite"), (wrong_machine, "mode_machine")):
        assert gate.offer(rec, now=0.0) == reason
        assert gate.command(0.0) is gate.damping
    assert gate.rejected == {"crc": 1, "mode_machine": 1, "non_finite": 1} and gate.accepted == 0
    assert gate.offer(good, now=0.0) is None
    np.testing.assert_array_equal(gate.command(0.05).tau, np.ones(robot.num_joints))


def test_damping_fallback_after_timeout(robot):
    gate = CommandGate(robot, timeout_s=0.1, damping_kd=robot.damping_kd)
    assert gate.command(0.0) is gate.damping  # before any command
    gate.offer(valid_lowcmd(robot, kp=50.0, kd=1.0, q=robot.default_q), now=1.0)
    assert gate.command(1.1).kp[0] == 50.0
    fallback = gate.command(1.1 + 1e-3)
    assert fallback is gate.damping and gate.timeouts == 1
    assert np.all(fallback.kp == 0) and np.all(fallback.kd == robot.damping_kd) and np.all(fallback.enabled)


def test_bridge_steps_pd_and_falls_back_to_damping(robot):
    """The loop: a held command, then the timeout; damping shows as tau = -kd dq."""
    bridge = SimBridge(BridgeConfig(command_timeout=0.02, damping_kd=3.0, fast=True), robot)
    bridge.gate.offer(valid_lowcmd(robot, tau=2.0), now=0.0)
    for _ in range(10):
        bridge.physics_step()
    np.testing.assert_allclose(bridge.core.joint_torque, 2.0)
    for _ in range(30):  # past the 20 ms timeout
        bridge.physics_step()
    dq = bridge.core.joint_dq
    bridge.physics_step()
    np.testing.assert_allclose(bridge.core.joint_torque, np.clip(-3.0 * dq, -robot.tau_limit, robot.tau_limit))
    assert np.any(dq != 0) and bridge.gate.timeouts == 1


def test_commands_arriving_together_before_the_start_are_each_validated_and_counted(robot):
    """Several LowCmds queued while the bridge holds time at 0 (a client repeating its first command
    until time moves) are all offered to the gate, so accepted + rejected == received."""
    reader = LatestSampleReader(LOWCMD, check_crc=False, depth=8)
    bridge = SimBridge(BridgeConfig(fast=True), robot, commands=reader)
    bad = valid_lowcmd(robot)
    bad["crc"] ^= 1
    for rec in (valid_lowcmd(robot), bad, valid_lowcmd(robot, tau=1.0)):
        reader.offer(rec)
    assert bridge.wait_for_first_command(threading.Event(), timeout_s=1.0)
    assert (bridge.gate.accepted, bridge.gate.rejected["crc"], reader.received) == (2, 1, 3)
    assert bridge.gate.command(0.0).tau[0] == 1.0          # the newest valid one is in force
    assert not bridge.wait_for_first_command(threading.Event(), timeout_s=0.05)   # nothing new


def test_by_default_the_robot_is_held_still_until_a_valid_command(robot):
    """A bridge started by hand before its controller used to simulate at once: the robot fell under
    zero torque before the node was up. Now simulated time stays at 0 until a valid LowCmd."""
    assert BridgeConfig().wait_for_command == -1 and load_config(REPO / "config" / "sim_bridge.yaml") == BridgeConfig()
    reader = LatestSampleReader(LOWCMD, check_crc=False, depth=8)
    bridge = SimBridge(BridgeConfig(), robot, commands=reader)
    bad = valid_lowcmd(robot, kd=1.0)
    bad["crc"] ^= 1
    reader.offer(bad)
    assert not bridge.wait_for_first_command(threading.Event(), timeout_s=0.1)     # a bad one does not release
    assert bridge.core.time == 0.0 and bridge.states_published > 0 and bridge.held_s is None
    reader.offer(valid_lowcmd(robot, kd=1.0))
    assert bridge.wait_for_first_command(threading.Event(), timeout_s=-1)
    assert bridge.held_s >= 0.0 and bridge.gate.accepted == 1 and bridge.core.time == 0.0


def answer(robot, tick: int) -> np.void:
    """A valid LowCmd answering the LowState of `tick` in lockstep (reserve[0])."""
    rec = valid_lowcmd(robot, kd=1.0)
    rec["reserve"][0] = tick
    encode_lowcmd(rec)
    return rec


def test_in_lockstep_the_bridge_steps_on_the_answer_to_its_last_lowstate(robot, monkeypatch):
    reader = LatestSampleReader(LOWCMD, check_crc=False, depth=8)
    bridge = SimBridge(BridgeConfig(lockstep=True), robot, commands=reader)
    assert not bridge.in_lockstep()                            # not before the first accepted command
    reader.offer(answer(robot, 0))
    bridge.await_answer(threading.Event())
    assert bridge.in_lockstep() and bridge.lockstep_answers == 1
    bridge.state_period()
    tick = int(bridge.lowstate["tick"])
    assert tick == 2
    reader.offer(answer(robot, 0))                             # a late answer to an older LowState
    reader.offer(answer(robot, tick))
    bridge.await_answer(threading.Event())
    assert bridge.lockstep_answers == 2 and bridge.gate.accepted == 3
    monkeypatch.setattr("bcg_sim_bridge.bridge.LOCKSTEP_TIMEOUT_S", 0.2)
    reader.offer(answer(robot, 0))
    bridge.await_answer(threading.Event())                     # no answer to tick 2 again: lockstep ends
    assert bridge.lockstep_ended_at == pytest.approx(bridge.core.time) and not bridge.in_lockstep()
    assert bridge.report()["lockstep"] == {"answers": 2, "ended_at_s": bridge.core.time}


def test_a_seed_perturbs_the_start_reproducibly(robot):
    plain = SimBridge(BridgeConfig(), robot).core.data.qpos.copy()
    a, b, c = (SimBridge(BridgeConfig(seed=k), robot).core.data.qpos.copy() for k in (3, 3, 4))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    joints = robot.joint_qpos_adr
    assert 0.005 < np.std(a[joints] - plain[joints]) < 0.05             # N(0, 0.02^2) rad
    assert a[3] ** 2 + a[6] ** 2 == pytest.approx(1.0) and a[4] == a[5] == 0.0   # turned about the vertical
    assert a[2] == plain[2]


def test_lowstate_from_sensors(robot):
    bridge = SimBridge(BridgeConfig(), robot)
    for _ in range(3):
        bridge.state_period()
    st, d = bridge.lowstate, bridge.core.data
    assert st["tick"] == 6 and st["mode_machine"] == 5
    ms = st["motor_state"]
    np.testing.assert_allclose(ms["q"][robot.motor_slots], bridge.core.joint_q, atol=1e-6)
    np.testing.assert_allclose(ms["dq"][robot.motor_slots], bridge.core.joint_dq, atol=1e-5)
    np.testing.assert_allclose(ms["tau_est"][robot.motor_slots], bridge.core.joint_torque, atol=1e-5)
    assert np.all(ms["mode"][29:] == 0)
    quat = d.qpos[3:7]  # the IMU site sits at the pelvis origin, axes aligned
    np.testing.assert_allclose(st["imu_state"]["quaternion"], quat, atol=1e-6)
    np.testing.assert_allclose(st["imu_state"]["rpy"], quat_to_rpy(quat), atol=1e-6)
    encode_lowstate(st)
    assert crc_ok(st)


def _axis_quat(axis: int, angle: float) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_axisAngle2Quat(q, np.eye(3)[axis], angle)
    return q


def test_quat_to_rpy():
    roll, pitch, yaw = 0.3, -0.2, 1.1
    zy, zyx = np.zeros(4), np.zeros(4)
    mujoco.mju_mulQuat(zy, _axis_quat(2, yaw), _axis_quat(1, pitch))
    mujoco.mju_mulQuat(zyx, zy, _axis_quat(0, roll))
    np.testing.assert_allclose(quat_to_rpy(zyx), [roll, pitch, yaw], atol=1e-12)


def test_23dof_model_loads_with_mode_machine_4(robot23):
    assert robot23.num_joints == 23 and robot23.mode_machine == 4
    bridge = SimBridge(BridgeConfig(), robot23)
    gate = bridge.gate
    assert gate.offer(valid_lowcmd(robot23, tau=0.5), now=0.0) is None
    rec5 = valid_lowcmd(robot23)
    rec5["mode_machine"] = 5
    encode_lowcmd(rec5)
    assert gate.offer(rec5, now=0.0) == "mode_machine"
    bridge.state_period()
    st = bridge.lowstate
    assert st["mode_machine"] == 4
    assert np.all(st["motor_state"]["mode"][~robot23.valid_slots] == 0)
    np.testing.assert_allclose(bridge.core.joint_torque, 0.5)


def stand_lowcmd(robot):
    """PD on the default pose with the built-in stand policy's gains (which stand in MuJoCo)."""
    kp, kd = stand_gains(robot)
    return valid_lowcmd(robot, kp=kp, kd=kd, q=robot.default_q)


def run_commanded(bridge, rec, seconds):
    """Step `bridge` for `seconds` of simulated time under `rec`; the root heights at each state."""
    heights = []
    while bridge.core.time < seconds - 1e-9:
        bridge.gate.offer(rec, bridge.core.time)
        bridge.state_period()
        heights.append(bridge.core.root_height)
    return np.array(heights)


def test_band_in_hold_mode_never_lifts_the_standing_robot(robot):
    """Taut at the start, no force while the robot stands: its feet carry it (penetration is measured)."""
    bridge = SimBridge(BridgeConfig(elastic_band=True), robot)
    start = bridge.core.root_height
    assert bridge.band.rest_length == pytest.approx(3.0 - bridge.core.data.xpos[bridge.band.body, 2])
    np.testing.assert_array_equal(bridge.band.force(bridge.core.data), 0.0)
    heights = run_commanded(bridge, stand_lowcmd(robot), 1.0)
    assert heights.max() <= start + 1e-3
    ev = bridge.metrics.report()
    assert not ev["fell"] and ev["foot_contacts"] > 0 and ev["foot_penetration_mean_m"] > 0


def test_the_evaluation_counts_the_robot_touching_itself(robot):
    """Standing: never; legs crossed (hips rolled inwards 0.3 rad each): from the first such sample."""
    bridge = SimBridge(BridgeConfig(), robot)
    run_commanded(bridge, stand_lowcmd(robot), 0.1)
    standing = bridge.metrics.report()
    assert standing["self_contact_fraction"] == 0.0 and standing["first_self_contact_s"] is None
    model, data = bridge.core.model, bridge.core.data
    metrics = RunMetrics(model, robot, fall_height=0.3)
    metrics.sample(data)
    joint = {n: k for k, n in enumerate(robot.joint_names)}
    data.qpos[robot.joint_qpos_adr[joint["left_hip_roll_joint"]]] = -0.3
    data.qpos[robot.joint_qpos_adr[joint["right_hip_roll_joint"]]] = 0.3
    mujoco.mj_forward(model, data)
    metrics.sample(data)
    report = metrics.report()
    assert report["self_contact_fraction"] == 0.5 and report["first_self_contact_s"] == pytest.approx(data.time)


def test_band_in_hold_mode_pulls_as_the_body_sinks(robot):
    """Damped (kp = 0), the robot sinks; the band pulls up by stiffness x sinking (it is at rest)."""
    bridge = SimBridge(BridgeConfig(elastic_band=True, band_damping=0.0), robot)
    band, data = bridge.band, bridge.core.data
    z0 = float(data.xpos[band.body, 2])
    run_commanded(bridge, valid_lowcmd(robot, kd=4.0), 0.5)
    sink = z0 - float(data.xpos[band.body, 2])
    assert sink > 0.05
    force = band.force(data)
    assert force[2] > 0
    assert np.linalg.norm(force) == pytest.approx(200.0 * (np.linalg.norm(band.anchor - data.xpos[band.body])
                                                            - band.rest_length))


def test_band_in_hang_mode_lifts_and_holds_the_robot_as_unitree(robot):
    """Unitree's band (k = 200, d = 100, anchor 3 m up, rest length 0) hangs the damped robot up."""
    cfg = BridgeConfig(elastic_band=True, band_mode="hang", fast=True, duration=1.0)
    bridge = SimBridge(cfg, robot)
    start = bridge.core.root_height
    bridge.run()
    assert bridge.band.rest_length == 0.0
    assert bridge.metrics.fall_time is None and bridge.core.root_height > start + 0.2
    free = SimBridge(cfg.replace(elastic_band=False, duration=1.5), robot)
    free.run()
    assert free.metrics.fall_time is not None


def test_band_release(robot):
    bridge = SimBridge(BridgeConfig(elastic_band=True, band_mode="hang", band_release_time=0.01), robot)
    band = bridge.band
    assert isinstance(band, ElasticBand) and band.anchor[2] == 3.0
    for _ in range(20):
        bridge.physics_step()
    assert not band.attached and np.all(bridge.core.data.xfrc_applied == 0)
    assert bridge.report()["elastic_band"] == {"attached_at_end": False}


def test_band_settings_are_checked(robot):
    with pytest.raises(ConfigError, match=r"^sim_bridge\.band_mode='lift': not one of the choices; "
                       r"expected one of 'hold', 'hang'$"):
        BridgeConfig(band_mode="lift")
    with pytest.raises(ConfigError, match=r"^sim_bridge\.band_length=-1\.0: negative in 'hang' mode"):
        BridgeConfig(band_mode="hang", band_length=-1.0)
    with pytest.raises(ValueError, match="band_length: the band's rest length would be"):
        SimBridge(BridgeConfig(elastic_band=True, band_length=-5.0), robot)


class BlockedRenderer:
    """Stands in for mujoco.Renderer: each render() waits for `release`, and notes the pose's time."""

    def __init__(self, release, times):
        self.release, self.times = release, times
        self.scene = type("Scene", (), {"flags": np.ones(mujoco.mjtRndFlag.mjNRNDFLAG, np.uint8)})()

    def update_scene(self, data, camera):
        self.times.append(float(data.time))

    def render(self):
        self.release.wait()
        return np.zeros((24, 32, 3), np.uint8)

    def close(self):
        pass


def test_recording_never_waits_for_rendering(robot, tmp_path):
    """The whole run completes while the renderer is stuck on its first frame; the frames are
    rendered afterwards, every one, in order, with the pose of its capture time."""
    release, times = threading.Event(), []
    bridge = SimBridge(BridgeConfig(fast=True, duration=0.2), robot)
    bridge.recorder = Recorder(bridge.core.model, str(tmp_path / "run.gif"), 30.0, 32, 24,
                               renderer_factory=lambda model, width, height: BlockedRenderer(release, times))
    bridge.run()
    assert bridge.recorder.captured == 7 and bridge.recorder.frames == 0 and bridge.recorder.pending == 7
    release.set()
    assert bridge.recorder.close() == tmp_path / "run.gif"
    assert bridge.recorder.frames == 7
    # the first LowState at or after each 1/30 s (states every 2 ms, the first one at 2 ms)
    np.testing.assert_allclose(times, [0.002, 0.034, 0.068, 0.1, 0.134, 0.168, 0.2], atol=1e-9)


def test_gif_frames_share_one_palette_of_few_colours(tmp_path):
    """A recorded GIF: every frame, at the recording's rate, in the one palette; a colour that only
    the last frames hold is in it (the palette is chosen from frames spread over the whole run)."""
    from PIL import Image, ImageSequence
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for _ in range(20)]
    for f in frames[15:]:
        f[:12] = (255, 0, 0)
    write_gif(frames, tmp_path / "run.gif", fps=10.0)
    with Image.open(tmp_path / "run.gif") as gif:
        assert gif.n_frames == 20 and gif.size == (32, 24) and gif.info["duration"] == 100 and gif.info["loop"] == 0
        decoded = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)]
    colours = {tuple(c) for f in decoded for c in f.reshape(-1, 3)}
    assert len(colours) <= GIF_COLOURS
    assert (decoded[19][:12] == (255, 0, 0)).all()


def test_metrics_penetration_and_tracking(robot, tmp_path):
    frames = 40
    table = np.zeros((frames, 36))
    table[:, 2] = 0.79
    table[:, 6] = 1.0
    table[:, 7 + np.arange(29)] = np.linspace(0, 0.1, frames)[:, None]
    path = tmp_path / "motion.csv"
    np.savetxt(path, table, delimiter=",")
    motion = load_motion(path)
    assert motion.duration_s == pytest.approx(39 / 30)
    cols = motion.joint_index(robot.joint_names)
    np.testing.assert_allclose(motion.sample(np.array([0.5]), cols).joint_pos[0], 0.1 * 15 / 39)
    bridge = SimBridge(BridgeConfig(fast=True, duration=0.5), robot, motion=motion)
    bridge.run()
    report = bridge.report()
    ev = report["evaluation"]
    assert ev["foot_contacts"] > 0 and 0 < ev["foot_penetration_mean_m"] <= ev["foot_penetration_max_m"] < 0.05
    assert set(ev["tracking"]["joint_rms_error_rad"]) == set(robot.joint_names)
    assert ev["tracking"]["samples"] == 251
    assert report["sim_time_s"] == pytest.approx(0.5) and report["physics_steps"] == 500
    out = tmp_path / "m" / "metrics.json"
    write_json_atomic(out, report)
    assert out.read_text().startswith("{") and os.listdir(out.parent) == ["metrics.json"]


def test_motion_format_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n")
    with pytest.raises(MotionFileError, match="expected 36"):
        load_motion(bad)


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"^sim_bridge\.state_hz=300\.0: physics_hz \(1000\) is not a whole "
                       r"multiple of it"):
        BridgeConfig(physics_hz=1000.0, state_hz=300.0)
    with pytest.raises(ConfigError, match=r"^sim_bridge\.physics_hz=-1\.0: too small; expected a number > 0$"):
        load_config(overrides={"physics_hz": -1})
    with pytest.raises(ConfigError, match=r"^sim_bridge\.fast='yes': a string; expected true or false$"):
        load_config(overrides={"fast": "yes"})
    params = tmp_path / "p.yaml"
    params.write_text("sim_bridge:\n  ros__parameters:\n    physcs_hz: 500.0\n")
    with pytest.raises(ConfigError, match=r"^sim_bridge\.physcs_hz=500\.0: unknown key; expected one of model, "):
        load_config(params)


def test_shipped_parameter_file_matches_the_defaults():
    assert load_config(REPO / "config" / "sim_bridge.yaml") == BridgeConfig()
    params = read_ros_parameters(REPO / "config" / "sim_bridge.yaml", NODE_NAME)
    assert list(params) == [f.name for f in dataclasses.fields(BridgeConfig)]      # every one, in order


def offset_pose_file(robot, tmp_path, frames) -> Path:
    """A LAFAN1 CSV of `frames` frames standing still 0.2 rad off the default pose in every joint."""
    table = np.zeros((frames, 36))
    table[:, 2], table[:, 6] = 0.79, 1.0
    table[:, 7:] = np.array([robot.default_q[robot.joint_names.index(j)] for j in SDK_JOINT_NAMES]) + 0.2
    path = tmp_path / "motion.csv"
    np.savetxt(path, table, delimiter=",")
    return path


def test_tracking_is_measured_from_the_motion_start(robot, tmp_path):
    """With motion_start 0.3 s the reference's frame 0 is compared at 0.3 s and later, never before."""
    motion = load_motion(offset_pose_file(robot, tmp_path, 40))
    bridge = SimBridge(BridgeConfig(fast=True, duration=0.5, motion_start=0.3), robot, motion=motion)
    bridge.run()
    tracking = bridge.report()["evaluation"]["tracking"]
    assert tracking["samples"] == 101                       # states every 2 ms from 0.3 s to 0.5 s
    assert tracking["mean_rms_error_rad"] > 0.1             # the reference is 0.2 rad off the held pose


def test_with_the_policys_lead_in_tracking_is_against_the_motion_blended_in_from_rest(robot, tmp_path):
    """motion_lead_in: the tracked reference begins at the default pose and is the file's after it."""
    path = offset_pose_file(robot, tmp_path, 60)
    plain = tracked_motion(BridgeConfig(motion=str(path)), robot)
    led = tracked_motion(BridgeConfig(motion=str(path), motion_lead_in=1.0), robot)
    cols = led.joint_index(robot.joint_names)
    np.testing.assert_allclose(led.sample(np.array([0.0]), cols).joint_pos[0], robot.default_q, atol=1e-12)
    np.testing.assert_allclose(led.sample(np.array([1.5]), cols).joint_pos[0],
                               plain.sample(np.array([1.5]), plain.joint_index(robot.joint_names)).joint_pos[0])
    errors = {}
    for name, lead_in in (("plain", 0.0), ("led", 1.0)):
        bridge = SimBridge(BridgeConfig(fast=True, duration=0.3), robot,
                           motion=tracked_motion(BridgeConfig(motion=str(path), motion_lead_in=lead_in), robot))
        bridge.run()
        errors[name] = bridge.report()["evaluation"]["tracking"]["mean_rms_error_rad"]
    assert errors["led"] < 0.5 * errors["plain"] and errors["plain"] > 0.1    # the led-in start is the held pose


def test_rejected_commands_are_logged_first_at_once_then_summarised(robot, caplog):
    bridge = SimBridge(BridgeConfig(fast=True), robot)
    bad = valid_lowcmd(robot, tau=1.0)
    bad["crc"] ^= 1
    for _ in range(3):
        bridge.gate.offer(bad, bridge.core.time)
        bridge.state_period()
    assert caplog.text.count("LowCmd rejected: CRC mismatch (the sender does not set the robot's CRC") == 1
    assert str(bridge.rejections) == "3 (crc 3)"


# -- emulating Unitree's MuJoCo simulator ----------------------------------------------------
UNITREE = dict(emulate="unitree_mujoco", physics_hz=200.0, state_hz=200.0, initial_pose="zero", fast=True)


class Recorded:
    """A LowState writer that keeps copies of what it is given (crc as the transport would leave it: 0)."""

    def __init__(self):
        self.states = []

    def write(self, rec):
        self.states.append(rec.copy())


def test_unitree_emulation_publishes_as_unitree_s_simulator(robot):
    states = Recorded()
    bridge = SimBridge(BridgeConfig(**UNITREE, duration=0.05), robot, states=states)
    bridge.run()
    prestep, stepped = states.states[:80], states.states[80:]
    assert all(not s["imu_state"]["quaternion"].any() and not s["motor_state"]["q"].any() for s in prestep)
    assert len(stepped) == 11 and bridge.core.dt == pytest.approx(0.005)      # one LowState per 5 ms step
    last = stepped[-1]
    assert last["mode_machine"] == 0 and last["tick"] == 0 and not last["motor_state"]["mode"].any()
    assert last["imu_state"]["quaternion"].any() and last["motor_state"]["q"][robot.motor_slots].any()
    with pytest.raises(ConfigError, match=r"^sim_bridge\.state_hz=500\.0: .*one LowState per physics step"):
        BridgeConfig(emulate="unitree_mujoco", physics_hz=1000.0, state_hz=500.0)


def test_unitree_emulation_applies_zero_torque_until_the_first_command(robot):
    bridge = SimBridge(BridgeConfig(**UNITREE), robot)
    start = bridge.core.root_height
    for _ in range(200):                                          # 1 s
        bridge.physics_step()
        np.testing.assert_array_equal(bridge.core.joint_torque, 0.0)
    assert bridge.core.root_height < start - 0.1                  # it falls


def test_unitree_emulation_computes_pd_once_per_command_from_one_step_old_sensors(robot):
    bridge = SimBridge(BridgeConfig(**UNITREE), robot)
    for _ in range(20):                                           # fall a little: q and dq are moving
        bridge.physics_step()
    sensors = bridge.core.data.sensordata.copy()                  # the state at the start of the last step
    q_now = bridge.core.joint_q
    rec = valid_lowcmd(robot, kp=30.0, kd=1.0, tau=0.5, q=robot.default_q)
    rec["mode_machine"], rec["crc"] = 0, 0                         # Unitree's simulator checks neither
    bridge.gate.offer(rec, bridge.core.time)
    q_s, dq_s = sensors[bridge.filler._q], sensors[bridge.filler._dq]
    assert np.abs(q_s - q_now).max() > 1e-5                        # the sensors are a step behind the state
    want = np.clip(0.5 + 30.0 * (robot.default_q - q_s) - 1.0 * dq_s, -robot.tau_limit, robot.tau_limit)
    for _ in range(3):                                            # held, not re-evaluated, until the next command
        bridge.physics_step()
        np.testing.assert_allclose(bridge.core.joint_torque, want, rtol=1e-6, atol=1e-9)
    assert bridge.gate.accepted == 1 and sum(bridge.gate.rejected.values()) == 0
