"""`Simulator.step(state_in, state_out, control, dt)`: the differentiable G1 simulator.

Per substep h = dt / substeps: kinematics -> composite inertias and subtree forces -> mass matrix
A = M + armature + h (damping + friction slope + PD) and generalised force f -> sparse L^T D L factor
-> free acceleration A^-1 f -> Delassus operator J A^-1 J^T on the foot chains -> projected
Gauss-Seidel on the smoothed contact impulses -> A^-1 J^T (s p) -> velocity and position update.
Runs on any Warp device with the same code.
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import warp as wp

from . import contact_kernels as ck
from . import contact_solver
from . import dynamics_kernels as dk
from . import integrator_kernels as ik
from .model import Model
from .bundling import Bundler
from .sparse_ldl import SparseLDL
from .state import Control, State


class NonFiniteStateError(FloatingPointError):
    """The simulation produced NaN or Inf; `env_ids` lists the environments affected."""

    def __init__(self, env_ids: List[int]):
        self.env_ids = list(env_ids)
        super().__init__(f"non-finite state in {len(self.env_ids)} environment(s): {self.env_ids[:20]}")


@dataclass
class _Scratch:
    """Per-substep intermediates (fresh per substep when gradients are recorded). Shapes in the
    kernels' docstrings; ncd = contact-dof entries, nr = 3 nc contact rows."""

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
    force: wp.array
    qdd_free: wp.array
    jt: wp.array
    y: wp.array
    g: wp.array
    v_free: wp.array
    smooth: wp.array
    sp: wp.array
    p_hist: wp.array
    z_hist: wp.array
    gen_impulse: wp.array
    dqd_contact: wp.array
    ldl: SparseLDL

    @classmethod
    def allocate(cls, model: Model, n: int, requires_grad: bool) -> "_Scratch":
        nb, nv, nr, it = model.nb, model.nv, model.ndof_contact, model.config.contact_iterations
        ncd = model.ncd

        def z(shape, dtype=wp.float64, grad=requires_grad):
            return wp.zeros(shape, dtype=dtype, device=model.device, requires_grad=grad)
        v3, q4, m33 = wp.vec3d, wp.quatd, wp.mat33d
        return cls(
            xrot=z((n, nb), q4), xpos=z((n, nb), v3), s_ang=z((n, nv), v3), s_lin=z((n, nv), v3),
            vel_ang=z((n, nb), v3), vel_lin=z((n, nb), v3), acc_ang=z((n, nb), v3), acc_lin=z((n, nb), v3),
            crb_m=z((n, nb)), crb_h=z((n, nb), v3), crb_i=z((n, nb), m33), frc_ang=z((n, nb), v3),
            frc_lin=z((n, nb), v3), a=z((n, model.npair)), diag=z((n, nv)), force=z((n, nv)), qdd_free=z((n, nv)),
            jt=z((n, ncd), v3), y=z((n, ncd), v3, grad=False), g=z((n, nr, nr)), v_free=z((n, nr)),
            smooth=z((n, model.nc)), sp=z((n, nr), grad=False), p_hist=z((n, it + 1, nr), grad=False),
            z_hist=z((n, it, nr), grad=False),
            gen_impulse=z((n, nv)),
            dqd_contact=z((n, nv)), ldl=SparseLDL(model, n, requires_grad),
        )

    def zero_accumulators(self) -> None:
        """Zero what the kernels accumulate into (or write only in part) before a reused substep."""
        for arr in (self.crb_m, self.crb_h, self.crb_i, self.frc_ang, self.frc_lin, self.v_free, self.gen_impulse):
            arr.zero_()


class _WindowBuffers:
    """Grad mode: the scratch and intermediate state of every substep of the current window, kept and
    reused by the next window (after `rewind`), so a taped window without bundling allocates nothing
    once warm (bundling allocates its branch batches per substep, freed with the tape)."""

    def __init__(self, model: Model, num_envs: int):
        self.model, self.num_envs = model, num_envs
        self.items: List[Tuple[_Scratch, State]] = []
        self.cursor = 0

    def rewind(self) -> None:
        self.cursor = 0

    def take(self) -> Tuple[_Scratch, State]:
        if self.cursor == len(self.items):
            self.items.append((_Scratch.allocate(self.model, self.num_envs, True),
                               State.zeros(self.model, self.num_envs, True)))
        else:
            scratch, state = self.items[self.cursor]
            scratch.zero_accumulators()
            for arr in list(vars(scratch).values()) + list(vars(state).values()):
                if isinstance(arr, wp.array) and arr.grad is not None:
                    arr.grad.zero_()
        self.cursor += 1
        return self.items[self.cursor - 1]


class Simulator:
    """Steps N environments of one Model.

    With `requires_grad`, every substep of a window gets its own buffers so a `wp.Tape` around `step`
    (passed as `tape`) can differentiate through any number of steps. `begin_window()` hands the
    previous window's buffers back for reuse: call it only once that window's backward is done (or
    will never run); without it, every taped step allocates new buffers."""

    def __init__(self, model: Model, num_envs: int, requires_grad: bool = False, check_finite: bool = True):
        self.model = model
        self.num_envs = num_envs
        self.requires_grad = requires_grad
        self.check_finite = check_finite
        self._scratch = None if requires_grad else _Scratch.allocate(model, num_envs, False)
        self._between = None if requires_grad else (State.zeros(model, num_envs), State.zeros(model, num_envs))
        self._window = _WindowBuffers(model, num_envs) if requires_grad else None
        self._flags = wp.zeros(num_envs, dtype=int, device=model.device)
        self.bundler = Bundler(self) if model.config.bundle.enabled else None
        self._nominal = None if requires_grad or self.bundler is None else State.zeros(model, num_envs)

    def state(self) -> State:
        return State.zeros(self.model, self.num_envs, self.requires_grad)

    def control(self) -> Control:
        return Control.zeros(self.model, self.num_envs, self.requires_grad)

    @property
    def bundle_stats(self):
        """Bundling counters (`BundleStats`), None when bundling is off."""
        return None if self.bundler is None else self.bundler.stats

    def cancel_bundles(self, env_ids) -> None:
        """Close the bundling windows of `env_ids` (call when resetting those environments' states)."""
        if self.bundler is not None:
            self.bundler.cancel(env_ids)

    def begin_window(self) -> None:
        """Grad mode: reuse the buffers of the substeps recorded since the last call (see the class)."""
        if self._window is not None:
            self._window.rewind()

    def step(self, state_in: State, state_out: State, control: Control, dt: float,
             tape: Optional[wp.Tape] = None) -> State:
        """Advance `dt` seconds in `model.config.substeps` substeps; returns state_out.

        When gradients are recorded, pass the enclosing tape (the hand-written adjoints record on it)."""
        substeps = self.model.config.substeps
        h = dt / substeps
        src = state_in
        for k in range(substeps):
            if self.requires_grad:
                scratch, buf = self._window.take()
            else:
                scratch, buf = self._scratch, self._between[k % 2]
                scratch.zero_accumulators()
            dst = state_out if k == substeps - 1 else buf
            if self.bundler is None:
                self._substep(src, dst, control, h, scratch, tape)
            else:   # the plain substep's output goes to `nominal`, the bundled one to dst
                nominal = self._nominal
                if self.requires_grad:
                    nominal = buf
                    dst = state_out if k == substeps - 1 else self.state()
                self.bundler.substep(src, nominal, dst, control, h, scratch, tape)
            src = dst
        if self.check_finite:
            self.raise_if_nonfinite(state_out)
        return state_out

    def nonfinite_envs(self, state: State) -> np.ndarray:
        """Indices of environments whose q or qd hold NaN/Inf (one small kernel, one copy to host)."""
        m = self.model
        wp.launch(ik.nonfinite_flags, dim=self.num_envs, inputs=[state.q, state.qd, self._flags],
                  device=m.device, record_tape=False)
        return np.flatnonzero(self._flags.numpy())

    def raise_if_nonfinite(self, state: State) -> None:
        bad = self.nonfinite_envs(state)
        if len(bad):
            raise NonFiniteStateError(bad.tolist())

    def _substep(self, s_in: State, s_out: State, control: Control, h: float, sc: _Scratch, tape) -> None:
        self._dynamics(s_in, control, h, sc)
        self._contact(s_in, s_out, h, sc, tape)
        wp.launch(ik.integrate, dim=s_in.q.shape[0], device=self.model.device, inputs=[
            self.model.device_arrays, wp.float64(h), s_in.q, s_in.qd, sc.qdd_free, sc.dqd_contact],
            outputs=[s_out.q, s_out.qd])

    def _dynamics(self, s_in: State, control: Control, h: float, sc: _Scratch) -> None:
        """Kinematics, mass matrix (sc.a), extra diagonal (sc.diag) and generalised force (sc.force)."""
        m, n, dev, mdl = self.model, s_in.q.shape[0], self.model.device, self.model.device_arrays
        wp.launch(dk.kinematics, dim=n, device=dev, inputs=[mdl, s_in.q, s_in.qd], outputs=[
            sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, sc.vel_ang, sc.vel_lin, sc.acc_ang, sc.acc_lin,
            sc.crb_m, sc.crb_h, sc.crb_i, sc.frc_ang, sc.frc_lin])
        wp.launch(dk.mass_matrix, dim=(n, m.nv), device=dev, inputs=[
            mdl, sc.s_ang, sc.s_lin, sc.crb_m, sc.crb_h, sc.crb_i], outputs=[sc.a])
        wp.launch(dk.generalised_force, dim=(n, m.nv), device=dev, inputs=[
            mdl, s_in.q, s_in.qd, wp.float64(h), sc.s_ang, sc.s_lin, sc.frc_ang, sc.frc_lin, sc.a, control.q_target,
            control.qd_target, control.kp, control.kd, control.tau], outputs=[sc.diag, sc.force])

    def _contact(self, s_in: State, s_out: State, h: float, sc: _Scratch, tape) -> None:
        """Free acceleration (sc.qdd_free), contact impulses (s_out.contact_impulse, s_out.contact_height)
        and their velocity change (sc.dqd_contact), after `_dynamics`."""
        m, n, dev, mdl = self.model, s_in.q.shape[0], self.model.device, self.model.device_arrays
        wp.launch(ck.contact_geometry, dim=(n, m.nc), device=dev, inputs=[
            mdl, s_in.q, sc.xrot, sc.xpos, sc.s_ang, sc.s_lin], outputs=[s_out.contact_height, sc.smooth, sc.jt])
        sc.ldl.factor(sc.a, sc.diag, tape)
        sc.ldl.solve(sc.force, sc.qdd_free, tape)
        wp.launch(ck.free_contact_velocity, dim=(n, m.nc), device=dev, inputs=[
            mdl, wp.float64(h), sc.jt, s_in.qd, sc.qdd_free], outputs=[sc.v_free])
        sc.ldl.delassus(sc.jt, sc.y, sc.g, tape)
        contact_solver.solve(m, sc.g, sc.v_free, sc.smooth, sc.sp, sc.p_hist, sc.z_hist, s_out.contact_impulse,
                             tape)
        wp.launch(ck.generalised_impulse, dim=(n, m.nc), device=dev, inputs=[
            mdl, sc.jt, s_out.contact_impulse], outputs=[sc.gen_impulse])
        sc.ldl.solve(sc.gen_impulse, sc.dqd_contact, tape)
