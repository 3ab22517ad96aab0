"""The node's hand-over from standing to the policy, on the bridge's MuJoCo physics in this process.

The node's core (`Controller`, its command plan as the LowCmd writer composes it) and the bridge's
plant (`SimBridge`, or its emulation of Unitree's simulator) in one loop of simulated time, no DDS
(bench/handover_blend.py's `run`): each LowState goes to the controller, its command to the plant for
one state period. The robot starts standing on the ground, no band. The wire and the processes are
covered by the DDS tests (test_mujoco_check_launch.py, test_unitree_mujoco_emulation.py).
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bcg.motion import load_motion
from bcg.robot import RobotDescription
from bcg_policy_node.config import PolicyNodeConfig
from bcg_policy_node.core.command_plan import LowCmdComposer, new_plan
from bcg_policy_node.core.controller import Controller
from bcg_policy_node.core.state_machine import Phase
from bcg_sim_bridge.bridge import SimBridge
from bcg_sim_bridge.config import BridgeConfig

REPO = Path(__file__).resolve().parents[1]
DANCE = REPO / "policies" / "shac_synthetic_dance_k300.onnx"
BLEND_S = PolicyNodeConfig().blend_duration
"""s, the node's default blend."""
_spec = importlib.util.spec_from_file_location("handover_blend", REPO / "bench" / "handover_blend.py")
handover = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(handover)


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


@pytest.fixture(scope="module")
def dance_motion(tmp_path_factory):
    """The synthetic dance the shipped policy was trained on, as the node reads it (a CSV)."""
    folder = tmp_path_factory.mktemp("motion")
    path = subprocess.run([sys.executable, "-m", "bcg_train.motion", "node-motion", "synthetic_dance", "--out",
                           str(folder)], capture_output=True, text=True, check=True).stdout.strip()
    return load_motion(path)


def node(robot, policy_path, motion=None, autostart_hold_s=0.5) -> Controller:
    return handover.node(robot, policy_path, motion, BLEND_S, autostart_hold_s)


def test_ramp_and_hold_stand_the_robot_with_the_stand_gains_whatever_the_policy_s(robot, dance_motion):
    """The dance policy's own gains (ankle kp 28.5) hold nobody up: a PD hold at the default pose with
    them toppled the G1 at 1.53 s. RAMP and HOLD use the stand policy's gains: 10 s standing."""
    controller = node(robot, DANCE, dance_motion, autostart_hold_s=60.0)
    bridge = SimBridge(BridgeConfig(headless=True), robot)
    handover.run(controller, bridge, 10.0)
    assert controller.machine.phase is Phase.HOLD
    ev = bridge.metrics.report()
    assert not ev["fell"] and ev["min_root_height_m"] > 0.7, ev


@pytest.mark.parametrize("emulate", [False, True], ids=["bridge", "unitree_mujoco"])
def test_the_policy_starts_from_rest_and_blends_in(robot, dance_motion, emulate):
    """RAMP 2 s, HOLD 0.5 s, BLEND, then the policy to 6.5 s: it runs from the first step of BLEND,
    whose observation is the robot standing still at the default pose (as its starts from rest in
    training), and the robot stays up, on this suite's physics and on Unitree's simulator's command
    path (explicit PD every 2 ms from one-step-old sensors, from the zero pose)."""
    controller = node(robot, DANCE, dance_motion)
    config = BridgeConfig(headless=True, **(handover.UNITREE if emulate else {}))
    bridge = SimBridge(config, robot)
    handover.run(controller, bridge, 6.5)
    phases = [(t.target.value, round(t.time_s, 2)) for t in controller.transitions]
    assert [p for p, _ in phases] == ["zero_torque", "ramp", "hold", "blend", "policy"], phases
    assert phases[3][1] == pytest.approx(2.5, abs=0.01) and phases[4][1] == pytest.approx(2.5 + BLEND_S, abs=0.01)
    start = controller.start_deviation
    assert start["joint_pos_rad"] < 0.06 and start["joint_vel_rad_s"] < 0.1 and start["tilt_deg"] < 4.0, start
    assert controller.policy_steps == pytest.approx(200, abs=2)              # 4 s at 50 Hz, BLEND included
    ev = bridge.metrics.report()
    assert not ev["fell"] and ev["min_root_height_m"] > 0.6, ev


def test_blend_commands_go_from_the_hold_to_the_policy(robot, dance_motion):
    """Half-way through BLEND the command is half the hold's and half the policy's, in targets and gains."""
    controller = node(robot, DANCE, dance_motion)
    bridge = SimBridge(BridgeConfig(headless=True), robot)
    handover.run(controller, bridge, 2.5 + BLEND_S / 2)
    assert controller.machine.phase is Phase.BLEND and controller.policy_steps >= 1
    plan, composer = new_plan(), LowCmdComposer()
    controller.write_plan(plan)
    j, t0 = controller.joints, controller.machine.entered_s
    slots = j.slots
    for fraction in (0.0, 0.5, 1.0):
        composer.compose(plan, t0 + fraction * BLEND_S)
        m = composer.cmd["motor_cmd"]
        for got, hold, policy in ((m["kp"], j.hold_kp, j.kp), (m["kd"], j.hold_kd, j.kd),
                                  (m["q"], j.default_q, controller.policy_q)):
            np.testing.assert_allclose(got[slots], (1 - fraction) * hold[slots] + fraction * policy[slots],
                                       rtol=1e-5, atol=1e-6)
    assert not np.allclose(controller.policy_q[slots], j.default_q[slots])   # the policy moved its targets
