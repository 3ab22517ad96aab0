"""Pure parts of the policy node: state machine, safety checks, joint mapping, LowCmd contents."""
import dataclasses
import logging
from pathlib import Path

import numpy as np
import pytest

from bcg.config_check import ConfigError
from bcg.contract import (
    load_policy,
    mlp_model,
    robot_state_spec,
    stand_contract,
    stand_policy_path,
    tracking_spec,
    write_policy,
)
from bcg.motion import load_motion
from bcg.robot import SDK_JOINT_NAMES, RobotDescription, resolve_model_path
from bcg.wire import crc_ok, decode_lowcmd, encode_lowcmd, new_lowstate
from bcg_policy_node.config import PolicyNodeConfig
from bcg_policy_node.core.command_plan import LowCmdComposer, new_plan
from bcg_policy_node.core.controller import Controller
from bcg_policy_node.core.joint_map import JointMap, JointMapError
from bcg_policy_node.core.remote import key_mask, set_keys
from bcg_policy_node.core.safety import (
    SafetyLimits,
    check_action,
    check_lockstep_silence,
    check_ready,
    check_stale,
    check_state,
)
from bcg_policy_node.core.state_machine import Phase, StateMachine

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


@pytest.fixture(scope="module")
def stand(robot, tmp_path_factory):
    return load_policy(stand_policy_path(robot, tmp_path_factory.mktemp("stand")))


def standing_state(robot, mode_machine=5):
    s = new_lowstate()
    s["mode_machine"] = mode_machine
    s["imu_state"]["quaternion"] = [1, 0, 0, 0]
    s["motor_state"]["q"][robot.motor_slots] = robot.default_q
    s["motor_state"]["temperature"] = 40
    return s


# -- state machine ---------------------------------------------------------------------------
def test_remote_drives_the_phases():
    m = StateMachine(ramp_duration_s=2.0, blend_duration_s=1.0)
    assert m.on_state(0.0, 0).target is Phase.ZERO_TORQUE
    assert m.on_state(0.1, 0) is None and m.phase is Phase.ZERO_TORQUE     # waits for start
    assert m.on_state(0.2, key_mask("start")).target is Phase.RAMP
    assert m.fraction(1.2) == pytest.approx(0.5)
    assert m.on_state(1.0, key_mask("A")) is None                          # A ignored while ramping
    assert m.tick(2.2).target is Phase.HOLD
    assert m.on_state(3.0, 0) is None and m.phase is Phase.HOLD             # no autostart
    assert m.on_state(3.1, key_mask("A")).target is Phase.BLEND             # A: the policy starts, blended in
    assert m.runs_policy and m.fraction(3.6) == pytest.approx(0.5)
    assert m.on_state(4.2, 0).target is Phase.POLICY
    assert m.on_state(4.3, key_mask("B")).target is Phase.DAMPING
    assert m.on_state(5.0, key_mask("start")) is None and m.phase is Phase.DAMPING   # latched


@pytest.mark.parametrize("phase_keys", [("select",), ("B",)])
def test_select_or_b_damps_from_zero_torque(phase_keys):
    m = StateMachine()
    m.on_state(0.0, 0)
    assert m.on_state(0.1, key_mask(*phase_keys)).reason == "remote: select/B pressed"


def test_autostart_runs_without_remote():
    m = StateMachine(ramp_duration_s=1.0, autostart=True, autostart_hold_s=0.5, blend_duration_s=1.0)
    m.on_state(0.0, 0)
    m.tick(0.01)
    assert m.phase is Phase.RAMP
    m.tick(1.02)
    m.tick(1.3)
    assert m.phase is Phase.HOLD
    m.tick(1.6)
    assert m.phase is Phase.BLEND and [t.reason for t in m.transitions][-1] == "autostart"
    m.tick(2.6)
    assert m.phase is Phase.POLICY and [t.reason for t in m.transitions][-1] == "blend complete"


# -- safety ----------------------------------------------------------------------------------
VALID = np.arange(29)
"""The slots a 29-DoF G1 drives."""


@pytest.mark.parametrize("corrupt, reason", [
    (lambda s: s["imu_state"]["gyroscope"].__setitem__(1, np.nan), "non-finite IMU gyroscope"),
    (lambda s: s["motor_state"]["q"].__setitem__(3, np.inf), "non-finite motor q in LowState on left_knee_joint"),
    (lambda s: s["motor_state"]["dq"].__setitem__(9, -36.0), "|dq| = 36.0 rad/s on right_knee_joint exceeds 35"),
    (lambda s: s["imu_state"].__setitem__("quaternion", [0, 1, 0, 0]), "base upside down"),
    (lambda s: s["motor_state"]["temperature"].__setitem__(4, [50, 90]), "motor temperature 90 C on left_ankle_pitch"),
    (lambda s: s["motor_state"]["motorstate"].__setitem__(20, 0x10), "motor fault bits 0x00000010 (chip overheating) "
                                                                       "on left_wrist_pitch"),
    (lambda s: s["motor_state"]["motorstate"].__setitem__(0, 0x18001), "0x00018001 (overcurrent, motor locked, "
                                                                        "undocumented bits) on left_hip_pitch"),
])
def test_each_state_fault_is_named(robot, corrupt, reason):
    s = standing_state(robot)
    assert check_state(s, VALID, SafetyLimits()) is None
    corrupt(s)
    assert reason in check_state(s, VALID, SafetyLimits())


def test_faults_on_invalid_slots_are_ignored(robot):
    s = standing_state(robot)
    s["motor_state"]["dq"][30] = np.nan
    s["motor_state"]["motorstate"][13] = 1
    assert check_state(s, np.delete(VALID, 13), SafetyLimits()) is None


def test_action_and_staleness_checks():
    assert check_action(np.zeros(29)) is None
    assert "index 2" in check_action(np.array([0, 0, np.nan]))
    assert check_stale(0.059, 0.06) is None
    assert check_stale(0.061, 0.06) == "LowState stale: newest is 61 ms old (limit 60 ms)"


# -- joint mapping ---------------------------------------------------------------------------
def test_policy_order_maps_by_name(robot):
    names = ("right_knee_joint", "left_hip_pitch_joint", "waist_yaw_joint")
    contract = stand_contract(robot)
    legs = type(contract)(joint_names=names, kp=[1, 2, 3], kd=[4, 5, 6], default_joint_pos=[0.7, -0.3, 0.1],
                          action_scale=[0.25] * 3, observation=robot_state_spec(3), control_period_s=0.02,
                          contact_stiffness=0, motion="")
    jm = JointMap.build(legs, robot)
    assert jm.slots.tolist() == [SDK_JOINT_NAMES.index(n) for n in names] == [9, 0, 12]
    assert jm.kp[9] == 1 and jm.kd[0] == 5 and jm.default_q[12] == pytest.approx(0.1)
    other = SDK_JOINT_NAMES.index("left_elbow_joint")            # not in the policy: robot gains and pose
    assert jm.kp[other] == pytest.approx(robot.kp[robot.joint_names.index("left_elbow_joint")])
    assert not jm.valid_slots[29:].any() and jm.valid_slots[:29].all()


@pytest.fixture(scope="module")
def robot23():
    path = resolve_model_path().parent / "scene_23dof.xml"     # beside $BCG_G1_MODEL, as Unitree ships them
    if not path.is_file():
        pytest.skip(f"no 23-DoF model beside {resolve_model_path()}")
    return RobotDescription.load(path)


def test_23dof_and_locked_waist_mask_their_slots(robot, robot23):
    small = robot23
    with pytest.raises(JointMapError, match="waist_roll_joint"):
        JointMap.build(stand_contract(robot), small)              # 29-DoF policy on a 23-DoF robot
    jm = JointMap.build(stand_contract(small), small, mode_machine=4)
    assert np.flatnonzero(~jm.valid_slots[:29]).tolist() == [13, 14, 20, 21, 27, 28]
    with pytest.raises(JointMapError, match="mode_machine 6"):
        JointMap.build(stand_contract(robot), robot, mode_machine=6)


@pytest.mark.parametrize("mode_machine, message", [
    (4, "mode_machine 4: the robot is a 23-DoF G1 but the robot model .* has 29 joints"),
    (99, r"mode_machine 99: not a G1 variant this node knows \(4 \(23-DoF\), 5 \(29-DoF\), 6 \(29-DoF, locked"),
])
def test_a_robot_variant_that_does_not_fit_the_model_is_refused_before_anything_is_sent(robot, stand, mode_machine,
                                                                                         message):
    c = make_controller(robot, stand, autostart=True)
    s = standing_state(robot)
    s["mode_machine"] = mode_machine
    with pytest.raises(JointMapError, match=message):
        c.on_state(s, 0.0)
    plan = new_plan()
    c.write_plan(plan)
    assert c.mode_machine is None and not plan["active"]            # the writer sends nothing


def test_a_simulator_that_leaves_mode_machine_unset_drives_the_model(robot, stand):
    c = make_controller(robot, stand, autostart=True)
    s = standing_state(robot)
    s["mode_machine"] = 0                                              # Unitree's Python simulator
    c.on_state(s, 0.0)
    c.tick(0.01)
    plan = new_plan()
    c.write_plan(plan)
    assert plan["active"] and plan["mode_machine"] == 0 and plan["mode"][:29].all()


# -- controller: what goes on the wire -------------------------------------------------------
def make_controller(robot, policy, **machine):
    return Controller(policy, robot, SafetyLimits(), StateMachine(**machine), damping_kd=3.0)


def command_at(controller, now):
    """The LowCmd the writer would send at `now` (None: nothing), through the plan, as decoded from the wire."""
    plan = new_plan()
    controller.write_plan(plan)
    if not plan["active"]:
        return None
    composer = LowCmdComposer()
    assert composer.compose(plan, now)
    return decode_lowcmd(encode_lowcmd(composer.cmd))


def test_lowcmd_echoes_mode_machine_and_enables_valid_slots(robot, stand):
    c = make_controller(robot, stand, ramp_duration_s=1.0)
    assert command_at(c, 0.0) is None                               # WAIT: nothing to send
    s = standing_state(robot, mode_machine=5)
    s["motor_state"]["q"][robot.motor_slots] = 0.0
    s["tick"] = 1                                                   # a running robot at the zero pose
    c.on_state(s, 0.0)
    cmd = command_at(c, 0.0)
    assert cmd["mode_machine"] == 5 and crc_ok(cmd)
    m = cmd["motor_cmd"]
    assert m["mode"][:29].all() and not m["mode"][29:].any()
    assert not m["kp"].any() and not m["kd"].any()                # zero torque
    set_keys(s["wireless_remote"], key_mask("start"))
    c.on_state(s, 0.1)
    for now, fraction in ((0.1, 0.0), (0.6, 0.5), (1.1, 1.0), (5.0, 1.0)):   # the plan ramps by itself
        q = command_at(c, now)["motor_cmd"]["q"][robot.motor_slots]
        np.testing.assert_allclose(q, fraction * robot.default_q, atol=1e-6)


def test_policy_targets_are_clipped_and_faults_damp(robot, tmp_path):
    contract = stand_contract(robot)
    n_obs = contract.observation.size
    path = write_policy(tmp_path / "big.onnx", mlp_model([(np.zeros((n_obs, 29)), np.full(29, 100.0))]), contract)
    c = make_controller(robot, load_policy(path), ramp_duration_s=0.0, autostart=True, autostart_hold_s=0.0,
                        blend_duration_s=0.0)
    s = standing_state(robot)
    for t in (0.0, 0.01, 0.02, 0.03, 0.035):
        c.on_state(s, t)
    assert c.machine.phase is Phase.POLICY and c.policy_step(0.04)
    np.testing.assert_allclose(command_at(c, 0.04)["motor_cmd"]["q"][robot.motor_slots], robot.q_upper, rtol=1e-6)
    s["motor_state"]["dq"][0] = 50.0
    c.on_state(s, 0.05)
    assert c.machine.phase is Phase.DAMPING and "|dq|" in c.transitions[-1].reason
    cmd = command_at(c, 0.05)
    assert not cmd["motor_cmd"]["kp"].any() and (cmd["motor_cmd"]["kd"][:29] == 3.0).all()
    assert not cmd["motor_cmd"]["q"].any()


def test_non_finite_targets_are_never_composed(robot, stand):
    c = make_controller(robot, stand)
    c.on_state(standing_state(robot), 0.0)
    plan = new_plan()
    c.write_plan(plan)
    plan["kd"][3] = np.nan
    composer = LowCmdComposer()
    assert not composer.compose(plan, 0.0)
    assert composer.compose(plan, 0.0, damping=True)           # what the writer sends instead
    assert not composer.cmd["motor_cmd"]["kp"].any() and (composer.cmd["motor_cmd"]["kd"][:29] == 3.0).all()


def test_stale_state_damps_on_tick(robot, stand):
    c = make_controller(robot, stand)
    c.on_state(standing_state(robot), 0.0)
    c.tick(0.05)
    assert c.machine.phase is Phase.ZERO_TORQUE
    c.tick(0.07)
    assert c.machine.phase is Phase.DAMPING and "stale" in c.transitions[-1].reason


def started_tracking_controller(robot, tmp_path, spec, state, **options):
    """A controller in BLEND (autostart, no ramp or hold) on `state`, for a zero policy with observation
    `spec` and a motion of 31 frames at 30 fps facing the world's x axis: root x = 0.5 t m, left hip
    pitch = t rad. Returns it and the list its policy appends each observation to."""
    contract = stand_contract(robot)
    tracking = type(contract)(**{**contract.__dict__, "observation": spec})
    path = write_policy(tmp_path / "track.onnx", mlp_model([(np.zeros((spec.size, 29)), np.zeros(29))]), tracking)
    motion_file = tmp_path / "ramp.csv"
    rows = np.zeros((31, 36))
    rows[:, 2], rows[:, 6] = 0.78, 1.0
    rows[:, 7] = np.arange(31) / 30.0                    # left hip pitch = t (rad), 30 frames/s
    rows[:, 0] = 0.5 * np.arange(31) / 30.0               # root x = 0.5 t (m)
    np.savetxt(motion_file, rows, delimiter=",")
    c = Controller(load_policy(path), robot, SafetyLimits(), StateMachine(ramp_duration_s=0.0, autostart=True,
                                                                          autostart_hold_s=0.0),
                   damping_kd=3.0, motion=load_motion(motion_file), **options)
    seen = []
    c.policy = lambda obs: seen.append(obs.copy()) or np.zeros(29, np.float32)
    for t in (0.0, 0.01, 0.02, 0.03):
        c.on_state(state, t)
    assert c.machine.phase is Phase.BLEND
    return c, seen


def test_reference_motion_advances_one_control_period_per_policy_step(robot, tmp_path):
    """Step k samples the motion at k * period + frames * period, as training does, whatever the wall clock;
    the reference root velocity comes from the file's root positions (x = 0.5 t m)."""
    spec = tracking_spec(29, frames=(0, 1), root_velocity=True)
    c, seen = started_tracking_controller(robot, tmp_path, spec, standing_state(robot))
    contract = c.contract
    ref = spec.terms[5]
    assert ref.name == "ref_joint_pos"
    offset = sum(term.size for term in spec.terms[:5])
    hip = contract.joint_names.index("left_hip_pitch_joint")
    for k, now in enumerate((0.5, 0.9, 0.93)):          # irregular wall-clock times
        assert c.policy_step(now)
        c.prepare_next_step()
        frames = seen[-1][offset:offset + ref.size].reshape(2, 29)[:, hip] + contract.default_joint_pos[hip]
        np.testing.assert_allclose(frames, [0.02 * k, 0.02 * (k + 1)], atol=1e-6)
        np.testing.assert_allclose(seen[-1][-6:], [0.5, 0, 0] * 2, atol=1e-6)


@pytest.mark.parametrize("align", [True, False])
def test_the_reference_turns_to_face_the_robot_when_the_policy_starts(robot, tmp_path, align):
    """A robot facing 100 deg from the motion's heading sees the reference's orientation relative to its
    own: straight ahead once the motion is turned to it (`align_heading`), 100 deg off otherwise."""
    spec = tracking_spec(29, frames=(1,))
    state = standing_state(robot)
    yaw = np.radians(100.0)
    state["imu_state"]["quaternion"] = [np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
    c, seen = started_tracking_controller(robot, tmp_path, spec, state, align_heading=align)
    assert c.policy_step(0.04)
    rot = seen[-1][spec.size - 6:]
    assert spec.terms[-1].name == "ref_root_rot"
    turned = -yaw * (not align)                          # the reference's heading seen from the robot
    np.testing.assert_allclose(rot, [np.cos(turned), np.sin(turned), 0, -np.sin(turned), np.cos(turned), 0], atol=1e-6)
    assert c.heading_offset_rad == pytest.approx(yaw if align else 0.0)


@pytest.mark.parametrize("key, value, message", [
    ("writer_spin", 0.002, "shorter than the writer period"), ("realtime_priority", 120, "1..98"),
    ("receiver_cpu", -2, "CPU number"), ("writer_cpu", -3, "CPU number")])
def test_timing_parameters_are_checked_by_name(key, value, message):
    with pytest.raises(ConfigError, match=f"^policy_node.{key}={value}: .*{message}"):
        PolicyNodeConfig(**{key: value})


def test_command_line_leaves_ros_sections_to_rclpy_and_refuses_anything_unknown(capsys):
    from bcg.ros_params import without_ros_arguments
    from bcg_policy_node.entry.main import main, parse_args
    launched = ["--policy", "a.onnx", "--domain", "0", "--ros-args", "-r", "__node:=policy_node",
                "--params-file", "/tmp/launch_params", "--", "--autostart"]   # as launch_ros appends it
    assert without_ros_arguments(launched) == ["--policy", "a.onnx", "--domain", "0", "--autostart"]
    args = parse_args(launched)
    assert (args.policy, args.domain, args.autostart) == ("a.onnx", 0, True)
    with pytest.raises(SystemExit) as e:
        main(["--polcy", "a.onnx"])                                         # a typo is never ignored
    assert e.value.code == 2 and "unrecognized arguments: --polcy" in capsys.readouterr().err


# -- start-up: a robot that is not ready yet -------------------------------------------------
def unitree_prestep_state():
    """What Unitree's simulator publishes before its first physics step: all zero."""
    return new_lowstate()


def test_a_robot_that_is_not_ready_is_waited_for_not_faulted(robot, stand):
    c = make_controller(robot, stand, autostart=True)
    for k in range(80):
        c.on_state(unitree_prestep_state(), 0.005 * k)
    s = standing_state(robot)
    s["imu_state"]["quaternion"] = [0.5, 0, 0, 0]                      # not a unit quaternion
    c.on_state(s, 0.4)
    nan = standing_state(robot)
    nan["imu_state"]["gyroscope"][0] = np.nan
    c.on_state(nan, 0.41)
    assert c.machine.phase is Phase.WAIT and c.transitions == []          # no damping latched
    assert c.dropped == {"non_finite": 1, "not_ready": 81} and command_at(c, 0.41) is None
    c.on_state(standing_state(robot), 0.42)
    c.tick(0.43)
    assert [t.target for t in c.transitions] == [Phase.ZERO_TORQUE, Phase.RAMP]


def test_every_joint_at_zero_with_tick_zero_is_not_ready_but_a_running_robot_is(robot):
    s = standing_state(robot)
    s["motor_state"]["q"][:] = 0.0
    assert check_ready(s, VALID) == "every joint at 0 with tick 0"
    s["tick"] = 5
    assert check_ready(s, VALID) is None
    s["imu_state"]["quaternion"] = 0.0
    assert check_ready(s, VALID) == "IMU quaternion is all zero"


def test_in_zero_torque_a_not_ready_state_keeps_the_node_waiting_and_fresh(robot, stand):
    c = make_controller(robot, stand, autostart=False)
    c.on_state(standing_state(robot), 0.0)
    assert c.machine.phase is Phase.ZERO_TORQUE
    c.on_state(unitree_prestep_state(), 0.05)
    assert c.machine.phase is Phase.ZERO_TORQUE and c.state_time == 0.05 and c.dropped["not_ready"] == 1


def test_once_motion_was_commanded_the_same_states_are_faults(robot, stand):
    c = make_controller(robot, stand, autostart=True, ramp_duration_s=1.0)
    c.on_state(standing_state(robot), 0.0)
    c.tick(0.01)
    assert c.machine.phase is Phase.RAMP
    c.on_state(unitree_prestep_state(), 0.02)
    assert c.machine.phase is Phase.DAMPING and c.transitions[-1].reason == "IMU quaternion is all zero"
    assert c.dropped == {"non_finite": 0, "not_ready": 0}


def test_damping_gains_are_per_joint(robot, stand):
    kd = np.linspace(1.0, 2.0, robot.num_joints)
    c = Controller(stand, robot, SafetyLimits(), StateMachine(), damping_kd=kd)
    c.on_state(standing_state(robot), 0.0)
    c.fault(0.1, "test")
    cmd = command_at(c, 0.1)
    np.testing.assert_allclose(cmd["motor_cmd"]["kd"][robot.motor_slots], kd, rtol=1e-6)
    assert not cmd["motor_cmd"]["kd"][29:].any()


# -- gains against the PD path the commands meet ---------------------------------------------
def test_damping_is_capped_and_unstable_policy_gains_are_named(robot, stand):
    from bcg.robot.pd_stability import PdPath
    from bcg_policy_node.core.gains import damping_gains, policy_gain_warning
    kd, note = damping_gains(robot, 4.0, PdPath(0.001, 0))
    assert note is None and np.all(kd == 4.0)                           # g1.yaml's 4 at the bridge's 1 ms
    kd, note = damping_gains(robot, 4.0, PdPath(0.005, 1))
    ankle = robot.joint_names.index("left_ankle_roll_joint")
    assert kd[ankle] == pytest.approx(1.37, abs=0.05) and kd.max() == 4.0
    assert note.startswith("damping kd 4 capped on 16 joint(s)") and f"left_ankle_roll_joint {kd[ankle]:.2f}" in note
    assert policy_gain_warning(stand.contract, robot, PdPath(0.002, 1)) is None
    warning = policy_gain_warning(stand.contract, robot, PdPath(0.005, 1))
    assert warning.startswith("the policy's gains are unstable under explicit PD every 5 ms from sensors 1 step")
    assert "left_ankle_roll_joint (kp 285" in warning and "pd_step / pd_delay_steps" in warning


def test_the_node_warns_at_start_for_its_declared_path(robot, caplog):
    from bcg_policy_node.entry.setup_node import build_controller
    caplog.set_level(logging.INFO, logger="bcg_policy_node")
    build_controller(PolicyNodeConfig(pd_step=0.005, pd_delay_steps=1))
    assert "the policy's gains are unstable under explicit PD every 5 ms" in caplog.text
    assert "the hold (RAMP / HOLD: the stand policy's) gains are unstable under explicit PD every 5 ms" in caplog.text
    assert "damping kd 4 capped on" in caplog.text
    caplog.clear()
    build_controller(PolicyNodeConfig())
    assert "unstable" not in caplog.text and "capped" not in caplog.text


def test_shipped_parameter_file_is_exactly_the_defaults():
    """config/policy_node.yaml names every parameter, each at PolicyNodeConfig's default."""
    from bcg.ros_params import read_ros_parameters
    from bcg_policy_node.config import NODE_NAME
    params = read_ros_parameters(REPO / "config" / "policy_node.yaml", NODE_NAME)
    assert list(params) == [f.name for f in dataclasses.fields(PolicyNodeConfig)]
    assert PolicyNodeConfig(**params) == PolicyNodeConfig()


def test_the_unitree_mujoco_profile_changes_only_what_that_simulator_needs():
    from bcg.ros_params import read_ros_parameters
    from bcg_policy_node.config import NODE_NAME
    params = read_ros_parameters(REPO / "config" / "policy_node_unitree_mujoco.yaml", NODE_NAME)
    assert params == {"domain": 1, "interface": "lo", "check_state_crc": False, "autostart": True,
                      "pd_step": 0.002, "pd_delay_steps": 1, "lowstate_clock": True, "stale_limit": 0.5}
    PolicyNodeConfig(**params)
    assert not PolicyNodeConfig().lowstate_clock       # the robot: the wall clock


# -- what the node says ----------------------------------------------------------------------
def test_upside_down_says_by_how_much_not_a_rounded_zero(robot):
    """'projected gravity z = 0.00 > 0' read as false; the angle and the value itself say it."""
    s = standing_state(robot)
    roll = np.radians(90.02)
    s["imu_state"]["quaternion"] = [np.cos(roll / 2), np.sin(roll / 2), 0, 0]
    reason = check_state(s, VALID, SafetyLimits())
    assert reason.startswith("base upside down: tilted 90.0 deg from upright, more than 90")
    assert "projected gravity z = 0.000349, > 0" in reason


def test_silence_is_reported_with_where_the_node_listens_and_repeated_until_a_state_comes():
    from bcg_policy_node.core.silence import SilenceWatch
    watch = SilenceWatch("domain 0, interface of Cyclone's choice (rt/lowstate)", start_s=10.0)
    assert watch.update(11.0, False) is None
    line = watch.update(12.0, False)
    assert line.startswith("No LowState in 2 s on domain 0, interface of Cyclone's choice (rt/lowstate): is the "
                           "robot or simulator on this domain?")
    assert watch.update(13.0, False) is None and watch.update(14.1, False).startswith("No LowState in 4 s")
    assert watch.update(14.2, True) is None and watch.update(30.0, False) is None     # heard: never again


def test_a_simulator_stepping_slower_than_declared_is_named(robot):
    """Unitree's default SIMULATE_DT 0.005 with a profile that says pd_step 0.002: the ramp threw the
    robot (|dq| 40 rad/s at 0.2 s) with no warning. Measured from the LowState interval now."""
    from bcg.robot.pd_stability import PdPath
    from bcg_policy_node.core.gains import pd_step_warning
    path = PdPath(0.002, 1)
    warning = pd_step_warning(0.005, robot, path)
    assert warning.startswith("LowState arrives every 5.0 ms but pd_step is 2 ms") and "SIMULATE_DT = 0.005" in warning
    assert "the hold (RAMP / HOLD: the stand policy's) gains are unstable" in warning
    assert pd_step_warning(0.002, robot, path) is None
    assert pd_step_warning(0.002, robot, PdPath(0.001, 0)) is None        # the robot reports slower than its PD


def test_the_staleness_limit_is_a_setting_in_seconds():
    from bcg_policy_node.entry.setup_node import build_controller
    assert PolicyNodeConfig().stale_limit == 0.06 and build_controller(PolicyNodeConfig()).stale_after_s == 0.06
    assert build_controller(PolicyNodeConfig(stale_limit=0.5)).stale_after_s == 0.5
    with pytest.raises(ConfigError, match=r"^policy_node\.stale_limit=0\.0: too small; expected a number > 0$"):
        PolicyNodeConfig(stale_limit=0.0)


def test_in_lockstep_only_a_long_wall_silence_is_a_fault_and_it_names_the_simulator():
    """Simulated time moves only with the simulator: a slow one is waited for, a silent one has stopped."""
    assert check_lockstep_silence(9.9, 10.0) is None
    reason = check_lockstep_silence(10.5, 10.0)
    assert reason.startswith("LowState stale") and "10.5 s of wall time in lockstep" in reason
    assert "did the simulator stop?" in reason


def test_the_lowstate_clock_follows_fresh_lowstates_not_the_wall_clock():
    """A simulator at 0.4x real time that sends no tick: the phase clock is pd_step per fresh
    LowState (its simulated time), a republished (identical) LowState does not advance it."""
    from bcg_policy_node.core.state_clock import LowStateClock, advance_state_clock
    assert advance_state_clock(None, True, 0.002) == 0.0
    assert advance_state_clock(1.0, True, 0.002) == pytest.approx(1.002)
    assert advance_state_clock(1.0, False, 0.002) == 1.0
    clock, state = LowStateClock(0.002), new_lowstate()
    times = []
    for k in range(1001):
        state["motor_state"]["q"][0] = 1e-3 * k          # the simulator stepped
        times.append(clock.on_state(state))
        times.append(clock.on_state(state))               # the same state again: not fresh
    assert times[0] == 0.0 and times[-1] == pytest.approx(2.0)
    with pytest.raises(ValueError):
        LowStateClock(0.0)

