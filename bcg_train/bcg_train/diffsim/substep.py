"""`Substep`: one physics substep of a Model under one simulator's settings, the seam that the
`Simulator` and bundling share (bundling re-runs substeps for its branches through it, and knows
nothing else of the simulator).

Per substep h: kinematics -> composite inertias and subtree forces -> mass matrix
A = M + armature + h (damping + friction slope + PD) and generalised force f -> sparse L^T D L factor
-> free acceleration A^-1 f -> Delassus operator J A^-1 J^T on the foot chains -> projected
iterations on the smoothed contact impulses (Gauss-Seidel, or Jacobi in the "paper" contact model,
`SimConfig.contact_model`) -> A^-1 J^T (s p) -> velocity and position update.
"""
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import warp as wp

from .arena import carve
from .config import SimConfig
from .kernels.contact import ContactKernels
from .kernels.device_model import device_model, nominal_physics, write_physics
from .kernels.dynamics import DynamicsKernels
from .kernels.integrator import IntegratorKernels
from .kernels.launch import LaunchSites
from .model import Model
from .solvers.contact_jacobi import ContactJacobi
from .solvers.contact_pgs import ContactPGS
from .solvers.sparse_ldl import SparseLDL
from .state import Control, State
from .variation import PhysicsVariation

SOLVERS = {"speculative": ContactPGS, "paper": ContactJacobi}
"""The impulse solve of each contact model (`SimConfig.contact_model`, config.CONTACT_MODELS)."""


@dataclass
class Scratch:
    """One substep's intermediates for up to `capacity` rows, of which the first `rows` are in use
    (one set per taped substep, so the backward pass finds them), with the launch sites of the
    substep's kernels (kernels.launch). Shapes in the kernels' docstrings, capacity first;
    ncd = contact-dof entries, nr = 3 nc contact rows."""

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
    gen_impulse: wp.array
    dqd_contact: wp.array
    ldl: SparseLDL
    impulses: Union[ContactPGS, ContactJacobi]
    """The contact model's impulse solve."""
    launches: LaunchSites
    rows: int
    zeroed_on_reuse: Tuple[wp.array, ...]
    """The allocations holding what `reuse` zeroes: the accumulators (crb_*, frc_*, v_free,
    gen_impulse), and every adjoint when there are adjoints."""

    @property
    def capacity(self) -> int:
        return self.a.shape[0]

    def reuse(self, rows: int, zero: bool = True) -> None:
        """Prepare another substep of `rows` (<= capacity) rows: zero what the kernels accumulate into
        (or write only in part) and every adjoint (unless `zero` is False: still zero from allocation),
        and start the launch sequences again."""
        if rows > self.capacity:
            raise ValueError(f"scratch for {self.capacity} rows asked for {rows}")
        self.rows = self.ldl.rows = self.impulses.rows = rows
        if zero:
            for block in self.zeroed_on_reuse:
                block.zero_()
        for sites in (self.launches, self.ldl.launches, self.impulses.launches):
            sites.begin()


class Substep:
    """The physics of one substep for any number of rows (environments or bundling branches), in the
    model's precision (`types`)."""

    def __init__(self, model: Model, config: SimConfig):
        config.validate()
        self.model, self.config = model, config
        self.types = model.types
        self.variation = PhysicsVariation()
        self.kernel_model = device_model(model, config)
        """The model's arrays and these settings' constants (a DeviceModel), the first argument of every kernel."""
        self.dk, self.ck, self.ik = (DynamicsKernels.of(self.types), ContactKernels.of(self.types),
                                     IntegratorKernels.of(self.types))
        """The dynamics, contact and integrator kernels in the model's precision."""
        self._nominal = nominal_physics(model)

    def vary(self, config: SimConfig, variation: PhysicsVariation) -> None:
        """Run later substeps with `config` and `variation` (domain randomisation). Settings that size
        the buffers (substeps, contact_iterations), bundling and the precision must stay as they are.
        The kernel model is overwritten in place (`write_physics`): launches that packed it, captured
        graphs included, read the new physics when they next run, so no tape whose backward pass is
        still to run may hold any (the simulator checks)."""
        config.validate()
        variation.validate(self._nominal["body_mass"])
        for name in ("substeps", "contact_iterations", "contact_model", "bundle", "precision"):
            if getattr(config, name) != getattr(self.config, name):
                raise ValueError(f"{name}: a varied simulator keeps {getattr(self.config, name)!r}, got "
                                 f"{getattr(config, name)!r}")
        self.config, self.variation = config, variation
        write_physics(self.kernel_model, self._nominal, config, variation)

    def scratch(self, rows: int, requires_grad: bool) -> Scratch:
        """Fresh intermediates for `rows` rows (with adjoints when `requires_grad`), all in use."""
        m, nr, it, dev = self.model, self.model.ndof_contact, self.config.contact_iterations, self.model.device
        t = self.types
        v3, q4, m33, n, nb, nv, f = t.vec3, t.quat, t.mat33, rows, m.nb, m.nv, t.real
        accumulators = {"crb_m": ((n, nb), f), "crb_h": ((n, nb), v3), "crb_i": ((n, nb), m33),
                        "frc_ang": ((n, nb), v3), "frc_lin": ((n, nb), v3), "v_free": ((n, nr), f),
                        "gen_impulse": ((n, nv), f)}
        others = {"xrot": ((n, nb), q4), "xpos": ((n, nb), v3), "s_ang": ((n, nv), v3), "s_lin": ((n, nv), v3),
                  "vel_ang": ((n, nb), v3), "vel_lin": ((n, nb), v3), "acc_ang": ((n, nb), v3),
                  "acc_lin": ((n, nb), v3), "a": ((n, m.npair), f), "diag": ((n, nv), f), "force": ((n, nv), f),
                  "qdd_free": ((n, nv), f), "jt": ((n, m.ncd), v3), "g": ((n, nr, nr), f), "smooth": ((n, m.nc), f),
                  "dqd_contact": ((n, nv), f)}
        acc_block, acc = carve(list(accumulators.values()), dev)
        arrays = dict(zip(accumulators, acc))
        arrays.update({name: wp.zeros(shape, dtype=dtype, device=dev) for name, (shape, dtype) in others.items()})
        zeroed = [acc_block]
        if requires_grad:   # every array but y has an adjoint
            grad_block, grads = carve([(a.shape, a.dtype) for a in arrays.values()], dev)
            for a, g in zip(arrays.values(), grads):
                a.grad = g
            zeroed.append(grad_block)
        return Scratch(**arrays, y=wp.zeros((n, m.ncd), dtype=v3, device=dev),
                       ldl=SparseLDL(self.kernel_model, dev, n, m.npair, requires_grad),
                       impulses=SOLVERS[self.config.contact_model](m.nc, it, n, dev, t), launches=LaunchSites(dev),
                       rows=n, zeroed_on_reuse=tuple(zeroed))

    def run(self, s_in: State, s_out: State, control: Control, h: float, sc: Scratch,
            tape: Optional[wp.Tape]) -> None:
        """s_out <- one substep of h [s] from s_in under `control`, every row at once, using the
        zeroed intermediates `sc`. With `tape` (the active one), the autodiff kernels record on it and
        the hand-written adjoints are added to it; None records nothing."""
        self.dynamics(s_in, control, h, sc, tape)
        self.contact(s_in, s_out, h, sc, tape)
        sc.launches(self.ik.integrate, sc.rows, [self.kernel_model, self.types.real(h), s_in.q, s_in.qd, sc.qdd_free,
                                                 sc.dqd_contact, s_out.q, s_out.qd], tape)

    def dynamics(self, s_in: State, control: Control, h: float, sc: Scratch, tape: Optional[wp.Tape]) -> None:
        """Kinematics, mass matrix (sc.a), extra diagonal (sc.diag) and generalised force (sc.force)."""
        n, nv, mdl, launch, dk, real = sc.rows, self.model.nv, self.kernel_model, sc.launches, self.dk, self.types.real
        launch(dk.kinematics, n, [mdl, s_in.q, s_in.qd, sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, sc.vel_ang, sc.vel_lin,
                                  sc.acc_ang, sc.acc_lin, sc.crb_m, sc.crb_h, sc.crb_i, sc.frc_ang, sc.frc_lin], tape)
        launch(dk.mass_matrix, (n, nv), [mdl, sc.s_ang, sc.s_lin, sc.crb_m, sc.crb_h, sc.crb_i, sc.a], tape)
        launch(dk.generalised_force, (n, nv), [
            mdl, s_in.q, s_in.qd, real(h), sc.s_ang, sc.s_lin, sc.frc_ang, sc.frc_lin, sc.a, control.q_target,
            control.qd_target, control.kp, control.kd, control.tau, sc.diag, sc.force], tape)

    def contact(self, s_in: State, s_out: State, h: float, sc: Scratch, tape: Optional[wp.Tape]) -> None:
        """Free acceleration (sc.qdd_free), contact impulses (s_out.contact_impulse, s_out.contact_height)
        and their velocity change (sc.dqd_contact), after `dynamics`."""
        n, nc, mdl, launch, ck = sc.rows, self.model.nc, self.kernel_model, sc.launches, self.ck
        launch(ck.contact_geometry, (n, nc), [mdl, s_in.q, sc.xrot, sc.xpos, sc.s_ang, sc.s_lin, s_out.contact_height,
                                              sc.smooth, sc.jt], tape)
        sc.ldl.factor(sc.a, sc.diag, tape)
        sc.ldl.solve(sc.force, sc.qdd_free, tape)
        biased = int(self.config.contact_model == "speculative")
        launch(ck.free_contact_velocity, (n, nc), [mdl, self.types.real(h), biased, sc.jt, s_in.qd, sc.qdd_free,
                                                   s_out.contact_height, sc.smooth, sc.v_free], tape)
        sc.ldl.delassus(sc.jt, sc.y, sc.g, tape)
        sc.impulses.solve(mdl, sc.g, sc.v_free, sc.smooth, s_out.contact_impulse, tape)
        launch(ck.generalised_impulse, (n, nc), [mdl, sc.jt, s_out.contact_impulse, sc.gen_impulse], tape)
        sc.ldl.solve(sc.gen_impulse, sc.dqd_contact, tape)
