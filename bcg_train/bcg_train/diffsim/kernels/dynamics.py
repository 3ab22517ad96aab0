"""Warp kernels for the smooth dynamics of one substep: kinematics with composite rigid body inertias
and recursive Newton-Euler bias forces, the mass matrix (in sparse_ldl's row storage), and the
generalised force with the motors' PD.

Spatial quantities are in world axes about one point o per environment (the base origin at the start
of the substep), motion vectors as (angular, linear). With a common point, composite inertias and
subtree forces are plain sums, so no frame transforms are needed between bodies.

Differentiability: every array element is written once (or accumulated with atomic_add) and never
changed after it has been read, and no value is carried between loop iterations in a local
variable; Warp's adjoint of these kernels is then exact.
"""
from functools import cached_property

import warp as wp

from ..precision import WarpDefinitions
from .device_model import FRICTIONLOSS_SCALE, FRICTIONLOSS_VELOCITY, LIMIT_DAMPING, LIMIT_STIFFNESS, DeviceModelStruct


class DynamicsKernels(WarpDefinitions):
    """The smooth dynamics kernels, in one precision (see diffsim.precision)."""

    @cached_property
    def quat_wxyz(self):
        real, quat = self.T.real, self.T.quat

        @self.func
        def quat_wxyz(q: wp.array2d(dtype=real), e: int):
            return quat(q[e, 4], q[e, 5], q[e, 6], q[e, 3])
        return quat_wxyz

    @cached_property
    def spatial_inertia_apply(self):
        real, vec3, mat33 = self.T.real, self.T.vec3, self.T.mat33

        @self.func
        def spatial_inertia_apply(m: real, h: vec3, ibar: mat33, w: vec3, v: vec3):
            """Angular part of I * (w, v) for a spatial inertia (m, h = m c, Ibar) about o; linear part below."""
            return ibar * w + wp.cross(h, v)
        return spatial_inertia_apply

    @cached_property
    def spatial_inertia_apply_lin(self):
        real, vec3 = self.T.real, self.T.vec3

        @self.func
        def spatial_inertia_apply_lin(m: real, h: vec3, w: vec3, v: vec3):
            return m * v - wp.cross(h, w)
        return spatial_inertia_apply_lin

    @cached_property
    def child_frame(self):
        real, vec3, quat = self.T.real, self.T.vec3, self.T.quat
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.func
        def child_frame(mdl: DeviceModel, b: int, rp: quat, xp: vec3, q: wp.array2d(dtype=real), e: int):
            """Body b's world orientation and position from its parent's (rp, xp) and its hinge angle, with
            the hinge's world axis and anchor (zero axis, anchor at the body origin for a fixed body)."""
            r0 = wp.mul(rp, mdl.body_quat[b])
            x0 = xp + wp.quat_rotate(rp, mdl.body_pos[b])
            d = mdl.body_dof[b]
            if d >= 0:
                anchor = x0 + wp.quat_rotate(r0, mdl.jnt_anchor[b])
                r = wp.mul(r0, wp.quat_from_axis_angle(mdl.jnt_axis[b], q[e, d + 1]))
                return r, anchor - wp.quat_rotate(r, mdl.jnt_anchor[b]), wp.quat_rotate(r0, mdl.jnt_axis[b]), anchor
            return r0, x0, vec3(), x0
        return child_frame

    @cached_property
    def body_frames(self):
        real, vec3, quat = self.T.real, self.T.vec3, self.T.quat
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        quat_wxyz, child_frame = self.quat_wxyz, self.child_frame

        @self.kernel
        def body_frames(mdl: DeviceModel, q: wp.array2d(dtype=real), xrot: wp.array2d(dtype=quat),
                        xpos: wp.array2d(dtype=vec3)):
            """Forward kinematics alone: every body's world orientation (x y z w) and origin [m]."""
            e = wp.tid()
            for b in range(mdl.nb):
                p = mdl.body_parent[b]
                if p < 0:
                    xrot[e, b] = wp.normalize(quat_wxyz(q, e))
                    xpos[e, b] = vec3(q[e, 0], q[e, 1], q[e, 2])
                else:
                    r, x, ax, anchor = child_frame(mdl, b, xrot[e, p], xpos[e, p], q, e)
                    xrot[e, b] = r
                    xpos[e, b] = x
        return body_frames

    @cached_property
    def kinematics(self):
        real, vec3, quat, mat33 = self.T.real, self.T.vec3, self.T.quat, self.T.mat33
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        quat_wxyz, spatial_inertia_apply = self.quat_wxyz, self.spatial_inertia_apply
        spatial_inertia_apply_lin, child_frame = self.spatial_inertia_apply_lin, self.child_frame

        @self.kernel
        def kinematics(
            mdl: DeviceModel, q: wp.array2d(dtype=real), qd: wp.array2d(dtype=real),
            # outputs
            xrot: wp.array2d(dtype=quat), xpos: wp.array2d(dtype=vec3),
            s_ang: wp.array2d(dtype=vec3), s_lin: wp.array2d(dtype=vec3),
            vel_ang: wp.array2d(dtype=vec3), vel_lin: wp.array2d(dtype=vec3),
            acc_ang: wp.array2d(dtype=vec3), acc_lin: wp.array2d(dtype=vec3),
            crb_m: wp.array2d(dtype=real), crb_h: wp.array2d(dtype=vec3), crb_i: wp.array2d(dtype=mat33),
            frc_ang: wp.array2d(dtype=vec3), frc_lin: wp.array2d(dtype=vec3),
        ):
            """Per environment, root to leaves: body poses, dof motion axes S (nv), body spatial velocities and
            bias accelerations (qdd = 0, gravity as a base acceleration), each body's inertia and bias force
            I a + v x* I v; then leaves to root: subtree (composite) inertias and subtree bias forces."""
            e = wp.tid()
            o = vec3(q[e, 0], q[e, 1], q[e, 2])
            for b in range(mdl.nb):
                p = mdl.body_parent[b]
                if p < 0:
                    r = wp.normalize(quat_wxyz(q, e))
                    xrot[e, b] = r
                    xpos[e, b] = o
                    ex = wp.quat_rotate(r, vec3(real(1.0), real(0.0), real(0.0)))
                    ey = wp.quat_rotate(r, vec3(real(0.0), real(1.0), real(0.0)))
                    ez = wp.quat_rotate(r, vec3(real(0.0), real(0.0), real(1.0)))
                    zero = vec3(real(0.0), real(0.0), real(0.0))
                    s_ang[e, 0] = zero
                    s_ang[e, 1] = zero
                    s_ang[e, 2] = zero
                    s_lin[e, 0] = vec3(real(1.0), real(0.0), real(0.0))
                    s_lin[e, 1] = vec3(real(0.0), real(1.0), real(0.0))
                    s_lin[e, 2] = vec3(real(0.0), real(0.0), real(1.0))
                    s_ang[e, 3] = ex
                    s_ang[e, 4] = ey
                    s_ang[e, 5] = ez
                    s_lin[e, 3] = zero
                    s_lin[e, 4] = zero
                    s_lin[e, 5] = zero
                    w = ex * qd[e, 3] + ey * qd[e, 4] + ez * qd[e, 5]
                    v = vec3(qd[e, 0], qd[e, 1], qd[e, 2])
                    vel_ang[e, b] = w
                    vel_lin[e, b] = v
                    acc_ang[e, b] = zero
                    acc_lin[e, b] = -mdl.gravity - wp.cross(w, v)
                else:
                    r, x, ax, anchor = child_frame(mdl, b, xrot[e, p], xpos[e, p], q, e)
                    xrot[e, b] = r
                    xpos[e, b] = x
                    d = mdl.body_dof[b]
                    if d >= 0:
                        sa = ax
                        sl = wp.cross(anchor - o, ax)
                        s_ang[e, d] = sa
                        s_lin[e, d] = sl
                        wj = sa * qd[e, d]
                        vj = sl * qd[e, d]
                        w = vel_ang[e, p] + wj
                        v = vel_lin[e, p] + vj
                        vel_ang[e, b] = w
                        vel_lin[e, b] = v
                        # a = a_parent + v x_m (S qd)
                        acc_ang[e, b] = acc_ang[e, p] + wp.cross(w, wj)
                        acc_lin[e, b] = acc_lin[e, p] + wp.cross(w, vj) + wp.cross(v, wj)
                    else:
                        vel_ang[e, b] = vel_ang[e, p]
                        vel_lin[e, b] = vel_lin[e, p]
                        acc_ang[e, b] = acc_ang[e, p]
                        acc_lin[e, b] = acc_lin[e, p]
                r = xrot[e, b]
                m = mdl.body_mass[b]
                c = xpos[e, b] + wp.quat_rotate(r, mdl.body_com[b]) - o
                rm = wp.quat_to_matrix(r)
                ic = rm * mdl.body_inertia[b] * wp.transpose(rm)
                ibar = ic + m * (wp.dot(c, c) * wp.identity(n=3, dtype=real) - wp.outer(c, c))
                h = m * c
                wp.atomic_add(crb_m, e, b, m)
                wp.atomic_add(crb_h, e, b, h)
                wp.atomic_add(crb_i, e, b, ibar)
                w = vel_ang[e, b]
                v = vel_lin[e, b]
                # f = I a + v x* (I v)
                iv_a = spatial_inertia_apply(m, h, ibar, w, v)
                iv_l = spatial_inertia_apply_lin(m, h, w, v)
                ia_a = spatial_inertia_apply(m, h, ibar, acc_ang[e, b], acc_lin[e, b])
                ia_l = spatial_inertia_apply_lin(m, h, acc_ang[e, b], acc_lin[e, b])
                wp.atomic_add(frc_ang, e, b, ia_a + wp.cross(w, iv_a) + wp.cross(v, iv_l))
                wp.atomic_add(frc_lin, e, b, ia_l + wp.cross(w, iv_l))
            # leaves to root: each body's subtree into its parent's
            for k in range(mdl.nb - 1):
                b = mdl.nb - 1 - k
                p = mdl.body_parent[b]
                wp.atomic_add(crb_m, e, p, crb_m[e, b])
                wp.atomic_add(crb_h, e, p, crb_h[e, b])
                wp.atomic_add(crb_i, e, p, crb_i[e, b])
                wp.atomic_add(frc_ang, e, p, frc_ang[e, b])
                wp.atomic_add(frc_lin, e, p, frc_lin[e, b])
        return kinematics

    @cached_property
    def mass_matrix(self):
        real, vec3, mat33 = self.T.real, self.T.vec3, self.T.mat33
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        spatial_inertia_apply, spatial_inertia_apply_lin = self.spatial_inertia_apply, self.spatial_inertia_apply_lin

        @self.kernel
        def mass_matrix(
            mdl: DeviceModel, s_ang: wp.array2d(dtype=vec3), s_lin: wp.array2d(dtype=vec3),
            crb_m: wp.array2d(dtype=real), crb_h: wp.array2d(dtype=vec3), crb_i: wp.array2d(dtype=mat33),
            a: wp.array2d(dtype=real),
        ):
            """Row i of A: A[i, j] = S_j . (Ic_body(i) S_i) for j = i and its ancestors (sparse_ldl's storage)."""
            e, i = wp.tid()
            b = mdl.dof_body[i]
            fa = spatial_inertia_apply(crb_m[e, b], crb_h[e, b], crb_i[e, b], s_ang[e, i], s_lin[e, i])
            fl = spatial_inertia_apply_lin(crb_m[e, b], crb_h[e, b], s_ang[e, i], s_lin[e, i])
            for k in range(mdl.dof_row_start[i], mdl.dof_row_start[i + 1]):
                j = mdl.pair_j[k]
                a[e, k] = wp.dot(s_ang[e, j], fa) + wp.dot(s_lin[e, j], fl)
        return mass_matrix

    @cached_property
    def generalised_force(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel
        def generalised_force(
            mdl: DeviceModel, q: wp.array2d(dtype=real), qd: wp.array2d(dtype=real), h: real,
            s_ang: wp.array2d(dtype=vec3), s_lin: wp.array2d(dtype=vec3),
            frc_ang: wp.array2d(dtype=vec3), frc_lin: wp.array2d(dtype=vec3), a: wp.array2d(dtype=real),
            q_target: wp.array2d(dtype=real), qd_target: wp.array2d(dtype=real), kp: wp.array2d(dtype=real),
            kd: wp.array2d(dtype=real), tau_ff: wp.array2d(dtype=real),
            diag: wp.array2d(dtype=real), force: wp.array2d(dtype=real),
        ):
            """force[:, i] = tau_i - C_i - d_i qd_i - friction_i + limit_i [N m or N] and diag[:, i], what
            the solve adds to A's diagonal: armature + h (damping + friction slope + PD) + limit terms.

            Motor torque tau = clamp(tau_ff + kp (q* - q) + kd (qd* - qd), +-limit), as the motor drivers do.
            They close this loop far faster than the substep, so it is integrated implicitly in
            qd+ = qd + h qdd: where not saturated, h kd + h^2 kp joins the diagonal and tau carries the matching
            -h kp qd term. Velocity-proportional terms are implicit too, as MuJoCo's Euler integrator treats
            joint damping: a term -c qd+ moves h c onto the diagonal. The smooth friction loss -F tanh(qd / v)
            is linearised the same way, and a joint beyond its limit gets an implicit spring-damper scaled to
            the dof's inertia A_ii (stiffness beta A_ii / h^2, damping gamma A_ii / h), stable at any h."""
            e, i = wp.tid()
            b = mdl.dof_body[i]
            bias = wp.dot(s_ang[e, i], frc_ang[e, b]) + wp.dot(s_lin[e, i], frc_lin[e, b])
            v = qd[e, i]
            tau = real(0.0)
            pd = real(0.0)
            j = mdl.dof_joint[i]
            if j >= 0:
                u = tau_ff[e, j] + kp[e, j] * (q_target[e, j] - q[e, i + 1]) + kd[e, j] * (qd_target[e, j] - v)
                lim = mdl.tau_limit[j]
                if u > lim or u < -lim:
                    tau = wp.clamp(u, -lim, lim)
                else:
                    tau = u - h * kp[e, j] * v
                    pd = h * kd[e, j] + h * h * kp[e, j]
            fl = mdl.solver[FRICTIONLOSS_SCALE] * mdl.dof_frictionloss[i]
            t = wp.tanh(v / mdl.solver[FRICTIONLOSS_VELOCITY])
            c = mdl.dof_damping[i] + fl / mdl.solver[FRICTIONLOSS_VELOCITY] * (real(1.0) - t * t)
            f = tau - bias - mdl.dof_damping[i] * v - fl * t
            if mdl.dof_limited[i] != 0:
                x = q[e, i + 1]
                gap = real(0.0)
                if x < mdl.dof_lower[i]:
                    gap = mdl.dof_lower[i] - x
                if x > mdl.dof_upper[i]:
                    gap = mdl.dof_upper[i] - x
                if gap != real(0.0):
                    aii = a[e, mdl.dof_row_start[i]]
                    k = mdl.solver[LIMIT_STIFFNESS] * aii / (h * h)
                    cl = mdl.solver[LIMIT_DAMPING] * aii / h + k * h
                    f = f + k * gap - cl * v
                    c = c + cl
            diag[e, i] = mdl.dof_armature[i] + h * c + pd
            force[e, i] = f
        return generalised_force
