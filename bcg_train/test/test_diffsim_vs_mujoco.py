"""The Warp G1 simulator against MuJoCo on the same XML (the comparisons of
bcg_train.diffsim.mujoco_reference, shortened), plus a 23-DoF build and the non-finite state check."""
from pathlib import Path

import numpy as np
import pytest

from bcg.contract.builtin import stand_gains
from bcg.robot import resolve_model_path
from bcg_train.diffsim import Model, NonFiniteStateError, SimConfig, Simulator
from bcg_train.diffsim import mujoco_reference as vd

DROP_SECONDS = 1.0


@pytest.fixture(scope="module")
def mujoco_drop(model):
    return vd.mujoco_drop(DROP_SECONDS, model)


def test_no_contact_trajectories_match_mujoco():
    r = vd.no_contact_agreement(frictionloss=False, duration=1.0, h=0.005)
    assert r.min_limit_margin > 0.0, "a joint reached its limit: the comparison would include limit handling"
    assert r.max_joint_error < 1e-3, r.max_joint_error
    assert r.max_base_error < 1e-3, r.max_base_error


def test_drop_kappa_300_stays_up_close_to_mujoco(model, mujoco_drop):
    w = vd.warp_drop(SimConfig(kappa=300.0), DROP_SECONDS, model)
    assert w.base_height.min() > 0.7
    diff = w.base_height[-1] - mujoco_drop.base_height[-1]
    assert abs(diff) < 0.010, f"final pelvis height Warp - MuJoCo = {diff * 1000:.2f} mm"
    assert w.num_contacts[-1] == 8 and mujoco_drop.num_contacts[-1] == 8


def test_feet_rest_where_mujocos_do_at_any_kappa_and_the_smoothing_alone_hovers(model, mujoco_drop):
    """Speculative contact with stabilisation (the default) rests the feet within 1 mm of MuJoCo's
    contact height at kappa 50 and 1000 alike; the smoothing alone (speculative 0, stabilisation 0:
    the paper's law solved by Gauss-Seidel, not by its Jacobi iterations, which are
    `contact_model="paper"`) holds them millimetres up at kappa 50, less at 1000."""
    reference = mujoco_drop.settled(mujoco_drop.contact_height)

    def gap(config):
        trace = vd.warp_drop(config, DROP_SECONDS, model)
        return abs(trace.settled(trace.contact_height) - reference)
    for kappa in (50.0, 1000.0):
        assert gap(SimConfig(kappa=kappa)) < 1e-3
    smoothing_alone = {k: gap(SimConfig(kappa=k, contact_speculative=0.0, contact_stabilization=0.0))
                       for k in (50.0, 1000.0)}
    assert smoothing_alone[50.0] > 4e-3 and smoothing_alone[1000.0] < smoothing_alone[50.0], smoothing_alone


def test_23dof_model_builds_and_steps():
    path = Path(resolve_model_path()).parent / "scene_23dof.xml"
    if not path.exists():
        pytest.skip(f"no 23-DoF model next to the 29-DoF one: {path}")
    model = Model.from_mujoco(path, device="cpu")
    assert model.nj == 23 and model.nv == 29 and model.nq == 30 and model.nc == 8
    sim = Simulator(model, 2)
    s0, s1 = sim.state(), sim.state()
    s0.assign(model.default_qpos(vd.drop_height(model, 0.005)))
    kp, kd = stand_gains(model.robot)
    ctrl = sim.control().set_pd(q_target=model.robot.default_q, kp=kp, kd=kd)
    for _ in range(5):
        sim.step(s0, s1, ctrl, vd.CONTROL_DT)
        s0, s1 = s1, s0
    q = s0.q.numpy()
    assert q.shape == (2, 30) and np.isfinite(q).all()
    assert 0.7 < q[0, 2] < vd.drop_height(model, 0.005)
    np.testing.assert_allclose(q[0], q[1])


def test_nan_initial_state_is_reported_with_its_environment(model):
    sim = Simulator(model, 3)
    s0, s1 = sim.state(), sim.state()
    qd = np.zeros((3, model.nv))
    qd[1, 7] = np.nan
    s0.assign(model.default_qpos(model.robot.standing_height), qd)
    with pytest.raises(NonFiniteStateError) as err:
        sim.step(s0, s1, sim.control(), vd.CONTROL_DT)
    assert err.value.env_ids == [1]
    assert np.isfinite(s1.q.numpy()[[0, 2]]).all()
