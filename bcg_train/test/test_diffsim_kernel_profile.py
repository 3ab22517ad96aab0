"""The kernel profile (diffsim.kernel_profile): every launch of a taped G1 window, forward and
adjoint, recorded with its kernel, pass, threads and a time; recorded-only launches left out; Warp
restored afterwards, also after an error."""
import numpy as np
import pytest
import warp as wp

from bcg_train.diffsim import Model, SimConfig, Simulator, Tape
from bcg_train.diffsim.kernel_profile import profile_kernels

N = 3
FORWARD_KERNELS = {"kinematics", "mass_matrix", "generalised_force", "contact_geometry", "factor", "solve_vectors",
                   "free_contact_velocity", "chain_lt_solve", "delassus_blocks", "pgs_forward",
                   "generalised_impulse", "integrate"}


@pytest.fixture(scope="module")
def window():
    """A simulator with gradients and a function running one taped control step on it."""
    model = Model.from_mujoco(device="cpu")
    sim = Simulator(model, N, SimConfig(kappa=300.0), requires_grad=True, check_finite=False)
    kp, kd = model.robot.kp, model.robot.kd

    def step():
        sim.segment.cut()
        s0 = sim.state().assign(model.default_qpos(model.robot.standing_height), np.zeros(model.nv))
        ctrl = sim.control().set_pd(q_target=model.robot.default_q, kp=kp, kd=kd)
        tape, s1 = Tape(), sim.state()
        with tape:
            sim.step(s0, s1, ctrl, 0.02)
        return tape, s1
    step()   # kernels loaded, buffers allocated
    return sim, step


def test_every_launch_of_a_taped_step_is_recorded_with_its_kernel_pass_threads_and_time(window):
    sim, step = window
    with profile_kernels("cpu") as forward:
        tape, s1 = step()
    with profile_kernels("cpu") as backward:
        tape.backward(grads={s1.q: wp.ones_like(s1.q, requires_grad=False)})
    substeps = sim.config.substeps
    rows = {(r.kernel, r.adjoint): r for r in forward.rows()}
    assert {k for k, _ in rows} == FORWARD_KERNELS and not any(a for _, a in rows)
    assert rows["solve_vectors", False].launches == 2 * substeps          # free acceleration and contact
    assert all(r.launches == substeps for (k, _), r in rows.items() if k != "solve_vectors")
    assert len(forward.launches) == 13 * substeps
    assert rows["kinematics", False].threads == N                          # one thread per environment
    assert rows["mass_matrix", False].threads == N * sim.model.nv
    adjoints = {r.kernel for r in backward.rows() if r.adjoint}
    assert {"kinematics", "mass_matrix", "integrate"} <= adjoints          # Warp's own adjoints
    assert {"factor_adjoint", "pgs_adjoint_sweeps"} <= {r.kernel for r in backward.rows()}   # hand-written
    for profile in (forward, backward):
        assert len(profile.seconds) == len(profile.launches) and min(profile.seconds) > 0
        assert 0 < profile.kernel_s <= profile.wall_s and profile.note == ""
        totals = [r.seconds for r in profile.rows()]
        assert totals == sorted(totals, reverse=True)
    table = forward.table("forward").splitlines()
    assert len(table) == 3 + len(FORWARD_KERNELS) and table[3].startswith(f"| {forward.rows()[0].kernel} | forward |")


def test_recorded_only_launches_are_not_counted_and_warp_is_restored_after_an_error(window):
    launch, replay = wp.launch, wp.Launch.launch
    sim, _ = window
    out = wp.zeros(N, dtype=int, device="cpu")
    state = sim.state()
    with pytest.raises(RuntimeError, match="inside"):
        with profile_kernels("cpu") as profile:
            from bcg_train.diffsim.kernels.integrator import IntegratorKernels
            nonfinite_flags = IntegratorKernels.of(sim.model.types).nonfinite_flags
            recorded = wp.launch(nonfinite_flags, N, [state.q, state.qd, out], record_cmd=True)
            assert profile.launches == []
            recorded.launch()
            wp.launch(nonfinite_flags, N, [state.q, state.qd, out])
            raise RuntimeError("inside")
    assert [k for k, _, _ in profile.launches] == ["nonfinite_flags"] * 2 and len(profile.seconds) == 2
    assert wp.launch is launch and wp.Launch.launch is replay
