"""bcg_train.evaluation.mujoco_contact: MuJoCo's contact varied in place, bad variants named."""
import mujoco
import numpy as np
import pytest

from bcg.config_check import parse_named_assignments
from bcg.robot import RobotDescription
from bcg_train.evaluation.mujoco_contact import apply_contact
from bcg_train.evaluation.plants import MujocoPlant


def test_a_variant_parses_into_its_name_and_typed_values():
    assert parse_named_assignments("grippy:friction=2,cone=elliptic") == ("grippy", {"friction": 2, "cone": "elliptic"})
    for bad in ("friction=2", "name:", "name:friction"):
        with pytest.raises(ValueError, match="expected NAME:key=value"):
            parse_named_assignments(bad)


def test_each_key_changes_the_g1_models_contact_and_nothing_else():
    plant = MujocoPlant(RobotDescription.load(None))
    model = plant.core.model
    before = {k: getattr(model, k).copy() for k in ("geom_friction", "geom_condim", "geom_solref", "body_mass")}
    assert model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    apply_contact(model, {"friction": 0.6, "torsion": 0.02, "solref": 0.005, "cone": "elliptic"})
    assert np.all(model.geom_friction[:, 0] == 0.6) and np.all(model.geom_friction[:, 1] == 0.02)
    np.testing.assert_array_equal(model.geom_friction[:, 2], before["geom_friction"][:, 2])
    assert np.all(model.geom_condim == 4) and np.all(model.geom_solref[:, 0] == 0.005)
    np.testing.assert_array_equal(model.geom_solref[:, 1], before["geom_solref"][:, 1])
    np.testing.assert_array_equal(model.body_mass, before["body_mass"])
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    plant.reset(*_standing(plant))            # the changed model still simulates
    plant.advance(plant.robot.default_q, plant.robot.kp, plant.robot.kd, 0.02)
    assert np.isfinite(plant.state().joint_pos).all()


def test_without_self_collision_the_legs_pass_through_each_other_and_still_stand_on_the_floor():
    robot = RobotDescription.load(None)
    joint = {n: k for k, n in enumerate(robot.joint_names)}
    for self_collision, touching in ((1, True), (0, False)):
        plant = MujocoPlant(robot)
        apply_contact(plant.core.model, {"self_collision": self_collision})
        q, qd = _standing(plant)
        plant.reset(q, qd)
        plant.advance(robot.default_q, robot.kp, robot.kd, 0.02)
        assert plant.state().foot_force.sum() > 0.5 * 9.81 * plant.core.model.body_mass.sum()   # on the floor
        q[7 + joint["left_hip_roll_joint"]], q[7 + joint["right_hip_roll_joint"]] = -0.3, 0.3   # legs crossed
        plant.reset(q, qd)
        assert (plant.state().self_contacts > 0) == touching


def _standing(plant):
    r = plant.robot
    q = np.concatenate([[0.0, 0.0, r.standing_height, 1.0, 0.0, 0.0, 0.0], r.default_q])
    return q, np.zeros(6 + r.num_joints)


@pytest.mark.parametrize("changes, message", [
    ({"friction": 0.0}, r"^friction=0.0: too small; expected a number > 0$"),
    ({"solref": -0.01}, r"^solref=-0.01: too small; expected a number > 0$"),
    ({"torsion": -1}, r"^torsion=-1: too small; expected a number >= 0$"),
    ({"friction": "high"}, r"^friction='high': a string; expected a number$"),
    ({"cone": "round"}, r"^cone='round': not one of the choices; expected one of 'pyramidal', 'elliptic'$"),
    ({"self_collision": 2}, r"^self_collision=2: too large; expected an integer in \[0, 1\]$"),
    ({"self_collision": True}, r"^self_collision=true: a boolean; expected an integer$"),
    ({"stiffness": 3}, r"^stiffness=3: unknown contact key; expected one of friction, torsion, solref, cone, "
                       r"self_collision$")])
def test_a_bad_key_or_value_is_named(changes, message):
    with pytest.raises(ValueError, match=message):
        apply_contact(mujoco.MjModel.from_xml_string("<mujoco/>"), changes)
