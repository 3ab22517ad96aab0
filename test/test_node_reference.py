"""The policy node observes the reference motion exactly as training and `bcg-eval` do: from the same
file, the same frames at the policy's rate, the same interpolation, joint-limit clipping and joint
rates, and the same lead-in from rest where the policy's contract asks for one. (Until 2026-12-05
the node interpolated the 30 fps file linearly and differenced it at 30 fps: joint angles 0.03-0.05
rad and joint rates 2.5-5.9 rad/s off the training's on the LAFAN1 segments.)
"""
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from bcg.contract import ObservationInputs, load_policy
from bcg.contract.policy_file import read_model, write_policy
from bcg.motion import MotionDirNotFoundError, load_motion
from bcg.robot import RobotDescription
from bcg.wire import new_lowstate
from bcg_policy_node.core.controller import Controller
from bcg_policy_node.core.safety import SafetyLimits
from bcg_policy_node.core.state_machine import StateMachine
from bcg_train.motion.clip import reference_frames
from bcg_train.motion.kinematics import RobotKinematics
from bcg_train.motion.library import load_clip, motion_file_for_nodes, motion_source
from bcg_train.motion.resample import ResampleConfig

REPO = Path(__file__).resolve().parents[1]
POLICY = REPO / "policies" / "shac_synthetic_dance_k300.onnx"     # reference terms at frames 1, 2, 3


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


def motion_file(name, robot, tmp_path):
    """The file the node is given for `name`: a built-in motion written as a 30 fps LAFAN1 CSV, else
    the named segment's window of the LAFAN1 file (skipped where the data is not found)."""
    try:
        return str(motion_source(name)) if name in ("jump", "dance") else \
            motion_file_for_nodes(name, RobotKinematics(robot), tmp_path)
    except MotionDirNotFoundError as e:
        pytest.skip(f"{name}: {e}")


def policy_with_lead_in(lead_in_s, tmp_path):
    """The shipped policy, its contract asking for a lead-in of `lead_in_s` s (the file as it is at 0)."""
    if not lead_in_s:
        return load_policy(POLICY)
    contract = dataclasses.replace(load_policy(POLICY).contract, motion_lead_in_s=lead_in_s)
    return load_policy(write_policy(tmp_path / "led_in.onnx", read_model(POLICY), contract))


@pytest.mark.parametrize("name,lead_in_s", [("synthetic_jump", 0.0), ("jump", 0.0), ("dance", 0.0),
                                            ("dance", 1.0)])
def test_the_node_builds_the_observation_training_builds_from_the_same_file(robot, tmp_path, name, lead_in_s):
    """Policy steps 0..N-1 on the same robot state: the node's observation (its Controller, the
    reference not turned) equals the one `bcg-eval` builds from `load_clip` of the file, to float32."""
    path = motion_file(name, robot, tmp_path)
    policy = policy_with_lead_in(lead_in_s, tmp_path)
    contract = policy.contract
    clip = load_clip(path, RobotKinematics(robot), ResampleConfig.of_policy(contract))
    node = Controller(policy, robot, SafetyLimits(), StateMachine(ramp_duration_s=0.0, autostart=True,
                                                                 autostart_hold_s=0.0),
                      damping_kd=3.0, motion=load_motion(path), align_heading=False)
    if lead_in_s:       # the node's reference begins at the rest pose, the file's does not
        assert np.allclose(node.source_motion.joint_pos[0], contract.default_joint_pos, atol=1e-12)
        raw = load_motion(path)
        assert not np.allclose(raw.joint_pos[0, raw.joint_index(contract.joint_names)], contract.default_joint_pos,
                               atol=0.05)
    state = new_lowstate()
    state["mode_machine"] = 5
    state["imu_state"]["quaternion"] = [np.cos(0.2), 0.03, -0.02, np.sin(0.2)]
    state["imu_state"]["gyroscope"] = [0.1, -0.2, 0.3]
    state["motor_state"]["q"][robot.motor_slots] = robot.default_q + 0.1
    state["motor_state"]["dq"][robot.motor_slots] = 0.5
    state["motor_state"]["temperature"] = 40
    for t in (0.0, 0.01, 0.02, 0.03):
        node.on_state(state, t)
    assert node.machine.runs_policy
    order = np.array([robot.joint_names.index(j) for j in contract.joint_names])
    frames = np.asarray(contract.observation.frames)
    worst = 0.0
    for k in range(0, clip.num_frames - 1 - frames.max(), 7):
        node.policy_steps = k
        node.prepare_next_step()
        motors = state["motor_state"]
        imu = state["imu_state"]
        expected = contract.observation.build(ObservationInputs(
            base_quat=imu["quaternion"].astype(float), base_ang_vel=imu["gyroscope"].astype(float),
            joint_pos=motors["q"][robot.motor_slots][order].astype(float),
            joint_vel=motors["dq"][robot.motor_slots][order].astype(float),
            last_action=node.last_action, default_joint_pos=contract.default_joint_pos,
            reference=reference_frames(clip, k + frames, order)))
        worst = max(worst, float(np.abs(node.observation() - expected).max()))
    assert worst < 1e-5, f"{name}: the node's observation differs from training's by up to {worst:.3g}"
