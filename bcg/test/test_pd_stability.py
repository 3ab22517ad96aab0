"""PD stability under explicit, delayed control paths: the bound, and the gains built from it."""
import numpy as np
import pytest

from bcg.contract.builtin import STAND_KD_SCALE_MAX, STAND_KP_SCALE, STAND_PATH, stand_gains
from bcg.robot import RobotDescription
from bcg.robot.pd_stability import GAIN_MARGIN, PdPath, best_kd, gain_margin, max_stable_kd, spectral_radius

BRIDGE_PATH = PdPath(0.001, 0)
"""This suite's bridge: PD inside every 1 ms physics step, from the current state."""
UNITREE_DEFAULT = PdPath(0.005, 1)
"""Unitree's simulate_python as shipped: SIMULATE_DT 5 ms, sensors one step old."""


@pytest.fixture(scope="module")
def robot():
    return RobotDescription.load()


def test_the_bound_is_the_explicit_euler_one():
    """Without delay: stable iff beta < 2 and alpha + 2 beta < 4 (alpha > 0); pure damping with one
    step of delay: beta < 1."""
    alpha, beta = np.meshgrid(np.linspace(0.01, 4, 60), np.linspace(0.01, 2.5, 60))
    stable = spectral_radius(alpha, beta, 0) < 1
    by_formula = (beta < 2) & (alpha + 2 * beta < 4)
    near_edge = (np.abs(beta - 2) < 0.05) | (np.abs(alpha + 2 * beta - 4) < 0.05)
    np.testing.assert_array_equal(stable[~near_edge], by_formula[~near_edge])
    assert spectral_radius(0.0, 0.99, 1) < 1 < spectral_radius(0.0, 1.01, 1)
    assert spectral_radius(0.3, 0.5, 1) > 1 > spectral_radius(0.2, 0.5, 1)     # alpha ~0.25 with a delay


def test_the_joint_inertia_includes_the_armature_and_nothing_held(robot):
    assert np.all(robot.joint_inertia > 0.01)                 # every G1 joint has armature 0.01 kg m^2
    ankle = robot.joint_names.index("left_ankle_roll_joint")
    assert robot.joint_inertia[ankle] == pytest.approx(0.0103, abs=5e-4)


def test_the_stand_gains_are_stable_with_margin_on_every_path_they_are_made_for(robot):
    kp, kd = stand_gains(robot)
    np.testing.assert_allclose(kp, STAND_KP_SCALE * robot.kp)
    assert np.all(kd <= STAND_KD_SCALE_MAX * robot.kd + 1e-12) and np.all(kd > 0)
    for path in (STAND_PATH, BRIDGE_PATH):
        assert gain_margin(kp, kd, robot.joint_inertia, path).min() >= GAIN_MARGIN, path
    old = gain_margin(10 * robot.kp, 3 * robot.kd, robot.joint_inertia, STAND_PATH)     # the gains they replace
    assert ({robot.joint_names[j] for j in np.flatnonzero(old < 1)}
            == {"left_ankle_roll_joint", "right_ankle_roll_joint"})
    assert ({"left_knee_joint", "left_ankle_pitch_joint"}
            <= {robot.joint_names[j] for j in np.flatnonzero(old < GAIN_MARGIN)})
    assert gain_margin(kp, kd, robot.joint_inertia, UNITREE_DEFAULT).min() < 1      # why the README sets 2 ms


def test_damping_is_capped_where_the_path_needs_it(robot):
    cap = max_stable_kd(robot.joint_inertia, UNITREE_DEFAULT)
    assert gain_margin(np.zeros(29), cap, robot.joint_inertia, UNITREE_DEFAULT).min() >= GAIN_MARGIN * 0.96
    assert gain_margin(np.zeros(29), np.full(29, 4.0), robot.joint_inertia, UNITREE_DEFAULT).min() < GAIN_MARGIN
    assert cap.min() == pytest.approx(1.0 / GAIN_MARGIN * 0.0103 / 0.005, rel=0.05)   # beta < 1 with the delay
    assert max_stable_kd(robot.joint_inertia, BRIDGE_PATH).min() > 4.0    # g1.yaml's 4 is fine at 1 ms


def test_best_damping_beats_its_neighbours():
    kd = best_kd([285.0], [0.0103], STAND_PATH)[0]
    alpha, beta = 285.0 * 0.002 ** 2 / 0.0103, kd * 0.002 / 0.0103
    assert spectral_radius(alpha, beta, 1) < min(spectral_radius(alpha, 0.8 * beta, 1),
                                                 spectral_radius(alpha, 1.2 * beta, 1))
