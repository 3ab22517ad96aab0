"""`Simulator.step(state_in, state_out, control, dt)`: the differentiable G1 simulator.

Per substep h = dt / substeps: kinematics -> composite inertias and subtree forces -> mass matrix
A = M + armature + h (damping + friction slope) and generalised force -> one sparse L^T D L solve
for [free acceleration | A^-1 J^T] -> Delassus operator -> projected Gauss-Seidel on the smoothed
contact impulses -> velocity and position update. Runs on any Warp device with the same code.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import warp as wp

from . import contact_kernels as ck
from . import dynamics_kernels as dk
from . import integrator_kernels as ik
from . import spd_solve
from .model import Model
from .state import Control, State


class NonFiniteStateError(FloatingPointError):
    """The simulation produced NaN or Inf; `env_ids` lists the environments affected."""

    def __init__(self, env_ids: List[int]):
        self.env_ids = list(env_ids)
        super().__init__(f"non-finite state in {len(self.env_ids)} environment(s): {self.env_ids[:20]}")


@dataclass
class _Scratch:
    """Per-substep intermediates (fresh per substep when gradients are recorded)."""

    xrot: wp.array
    xpos: wp.array
    s_ang: wp.array
    s_lin: wp.array
    vel_ang: wp.array
    vel_lin: wp.array
    acc_ang: wp.array
    acc_lin: wp.array
    crb_m: wp.array
    crb_h: wp.array
    crb_i: wp.array
    frc_ang: wp.array
    frc_lin: wp.array
    a: wp.array
    diag: wp.array
    ld: wp.array
    rhs: wp.array
    x: wp.array
    tau: wp.array
    pd_diag: wp.array
    g: wp.array
    v_free: wp.array
    smooth: wp.array
    residual: wp.array
    p: wp.array

    @classmethod
    def allocate(cls, model: Model, n: int, requires_grad: bool) -> "_Scratch":
        nb, nv, nr, it = model.nb, model.nv, model.ndof_contact, model.config.contact_iterations

        def z(shape, dtype=wp.float64, grad=requires_grad):
            return wp.zeros(shape, dtype=dtype, device=model.device, requires_grad=grad)
        return cls(
            xrot=z((n, nb), wp.quatd), xpos=z((n, nb), wp.vec3d), s_ang=z((n, nv), wp.vec3d), s_lin=z((n, nv), wp.vec3d),
            vel_ang=z((n, nb), wp.vec3d), vel_lin=z((n, nb), wp.vec3d), acc_ang=z((n, nb), wp.vec3d),
            acc_lin=z((n, nb), wp.vec3d), crb_m=z((n, nb)), crb_h=z((n, nb), wp.vec3d), crb_i=z((n, nb), wp.mat33d),
            frc_ang=z((n, nb), wp.vec3d), frc_lin=z((n, nb), wp.vec3d), a=z((n, nv, nv)), diag=z((n, nv)), ld=z((n, nv, nv), grad=False),
            rhs=z((n, nv, 1 + nr)), x=z((n, nv, 1 + nr)), tau=z((n, nv)), pd_diag=z((n, nv)), g=z((n, nr, nr)), v_free=z((n, nr)),
            smooth=z((n, model.nc)), residual=z((n, it, nr)), p=z((n, it + 1, nr)),
        )

    def zero_accumulators(self) -> None:
        for arr in (self.crb_m, self.crb_h, self.crb_i, self.frc_ang, self.frc_lin, self.a, self.g, self.v_free,
                    self.residual, self.pd_diag):
            arr.zero_()


class Simulator:
    """Steps N environments of one Model. With `requires_grad`, every substep gets fresh buffers so a
    `wp.Tape` around `step` (passed as `tape`) can differentiate through any number of steps."""

    def __init__(self, model: Model, num_envs: int, requires_grad: bool = False, check_finite: bool = True):
        self.model = model
        self.num_envs = num_envs
        self.requires_grad = requires_grad
        self.check_finite = check_finite
        self._scratch = None if requires_grad else _Scratch.allocate(model, num_envs, False)
        self._flags = wp.zeros(num_envs, dtype=int, device=model.device)

    def state(self) -> State:
        return State.zeros(self.model, self.num_envs, self.requires_grad)

    def control(self) -> Control:
        return Control.zeros(self.model, self.num_envs, self.requires_grad)

    def step(self, state_in: State, state_out: State, control: Control, dt: float,
             tape: Optional[wp.Tape] = None) -> State:
        """Advance `dt` seconds in `model.config.substeps` substeps; returns state_out.

        When gradients are recorded, pass the enclosing tape (needed for the solve's adjoint)."""
        substeps = self.model.config.substeps
        h = dt / substeps
        src = state_in
        for k in range(substeps):
            dst = state_out if k == substeps - 1 else State.zeros(self.model, self.num_envs, self.requires_grad)
            if self.requires_grad:
                scratch = _Scratch.allocate(self.model, self.num_envs, True)
            else:
                scratch = self._scratch
                scratch.zero_accumulators()
            dst.qd.zero_()
            self._substep(src, dst, control, h, scratch, tape)
            src = dst
        if self.check_finite:
            self.raise_if_nonfinite(state_out)
        return state_out

    def nonfinite_envs(self, state: State) -> np.ndarray:
        """Indices of environments whose q or qd hold NaN/Inf (one small kernel, one copy to host)."""
        m = self.model
        wp.launch(ik.nonfinite_flags, dim=self.num_envs, inputs=[state.q, state.qd, m.nq, m.nv, self._flags],
                  device=m.device, record_tape=False)
        return np.flatnonzero(self._flags.numpy())

    def raise_if_nonfinite(self, state: State) -> None:
        bad = self.nonfinite_envs(state)
        if len(bad):
            raise NonFiniteStateError(bad.tolist())

    def _substep(self, s_in: State, s_out: State, control: Control, h: float, sc: _Scratch, tape) -> None:
        m, n, dev = self.model, self.num_envs, self.model.device
        cfg = m.config
        h64 = wp.float64(h)
        g = wp.vec3d(*m.gravity)
        wp.launch(dk.kinematics, dim=n, device=dev, inputs=[
            s_in.q, s_in.qd, m.nb, g, m.body_parent, m.body_dof, m.body_pos, m.body_quat, m.body_mass, m.body_com,
            m.body_inertia, m.jnt_axis, m.jnt_anchor], outputs=[
            sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, sc.vel_ang, sc.vel_lin, sc.acc_ang, sc.acc_lin,
            sc.crb_m, sc.crb_h, sc.crb_i, sc.frc_ang, sc.frc_lin])
        wp.launch(dk.composite, dim=n, device=dev, inputs=[m.nb, m.body_parent],
                  outputs=[sc.crb_m, sc.crb_h, sc.crb_i, sc.frc_ang, sc.frc_lin])
        wp.launch(dk.mass_matrix, dim=(n, m.npair), device=dev, inputs=[
            m.pair_i, m.pair_j, m.dof_body, sc.s_ang, sc.s_lin, sc.crb_m, sc.crb_h, sc.crb_i], outputs=[sc.a])
        wp.launch(ik.pd_torque, dim=(n, m.nj), device=dev, inputs=[
            s_in.q, s_in.qd, m.joint_dof, m.tau_limit, control.q_target, control.qd_target, control.kp, control.kd,
            control.tau, h64], outputs=[sc.tau, sc.pd_diag])
        wp.launch(dk.generalised_force, dim=(n, m.nv), device=dev, inputs=[
            s_in.q, s_in.qd, h64, m.dof_body, sc.s_ang, sc.s_lin, sc.frc_ang, sc.frc_lin, m.dof_armature,
            m.dof_damping, m.dof_frictionloss, wp.float64(cfg.frictionloss_velocity), m.dof_limited, m.dof_lower,
            m.dof_upper, wp.float64(cfg.limit_stiffness), wp.float64(cfg.limit_damping), sc.tau, sc.pd_diag, sc.a], outputs=[sc.diag, sc.rhs])
        wp.launch(ck.contact_geometry, dim=(n, m.nc), device=dev, inputs=[
            sc.xrot, sc.xpos, m.sphere_body, m.sphere_pos, m.sphere_radius, wp.float64(cfg.kappa)],
            outputs=[s_out.contact_height, sc.smooth])
        wp.launch(ck.contact_jacobian, dim=(n, m.contact_dof_c.shape[0]), device=dev, inputs=[
            s_in.q, sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, m.sphere_body, m.sphere_pos, m.sphere_radius,
            m.contact_dof_c, m.contact_dof_d], outputs=[sc.rhs])
        spd_solve.solve(m, sc.a, sc.diag, sc.rhs, sc.x, sc.ld, tape)
        nr = m.ndof_contact
        wp.launch(ck.delassus, dim=(n, nr, nr + 1), device=dev, inputs=[
            nr, h64, m.contact_dof_start, m.contact_dof_d, s_in.qd, sc.rhs, sc.x],
                  outputs=[sc.g, sc.v_free])
        wp.launch(ck.projected_gauss_seidel, dim=n, device=dev, inputs=[
            m.nc, cfg.contact_iterations, sc.g, sc.v_free, sc.smooth, m.sphere_friction],
            outputs=[sc.residual, sc.p])
        wp.launch(ck.contact_impulse, dim=(n, m.nc), device=dev, inputs=[m.nc, cfg.contact_iterations, sc.p, sc.smooth],
                  outputs=[s_out.contact_impulse])
        wp.launch(ik.velocity_update, dim=(n, m.nv), device=dev, inputs=[
            m.nc, h64, s_in.qd, sc.x, s_out.contact_impulse], outputs=[s_out.qd])
        wp.launch(ik.position_update, dim=n, device=dev, inputs=[m.nv, h64, s_in.q, s_out.qd], outputs=[s_out.q])
