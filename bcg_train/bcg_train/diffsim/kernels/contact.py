"""Warp kernels of the smoothed impulse contact geometry (docs/method.md, "Contact model"); the Delassus
operator is in sparse_ldl, the impulse solve in solvers/contact_pgs (the "speculative" contact model) or
solvers/contact_jacobi (the "paper" model; `SimConfig.contact_model`).

Each foot sphere against the plane z = 0: signed height c of its lowest point, smoothing
s_k(c) = 1 / (1 + exp(k c)), contact Jacobian rows (normal z, tangents x, y) on the sphere's
ancestor dofs, the impulse-free contact velocity (with the speculative / stabilisation bias of the
normal row in the "speculative" model, without any in the "paper" model) and the generalised impulse
J^T (s p).
Write-once / accumulate-before-read discipline as in dynamics_kernels.
"""
from functools import cached_property

import warp as wp

from ..precision import WarpDefinitions
from .device_model import CONTACT_SPECULATIVE, CONTACT_STABILIZATION, KAPPA, DeviceModelStruct


class ContactKernels(WarpDefinitions):
    """The contact geometry kernels, in one precision (see diffsim.precision)."""

    @cached_property
    def contact_geometry(self):
        real, vec3, quat = self.T.real, self.T.vec3, self.T.quat
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel
        def contact_geometry(
            mdl: DeviceModel, q: wp.array2d(dtype=real), xrot: wp.array2d(dtype=quat), xpos: wp.array2d(dtype=vec3),
            s_ang: wp.array2d(dtype=vec3), s_lin: wp.array2d(dtype=vec3),
            height: wp.array2d(dtype=real), smooth: wp.array2d(dtype=real), jt: wp.array2d(dtype=vec3),
        ):
            """Sphere k: height [m] of its lowest point above the ground, smoothing factor s_k [-], and J^T on
            its chain: entry t = (k, ancestor dof d) is the velocity of the lowest point per unit qd_d as
            (normal z, x, y) [m/s per rad/s or m/s]."""
            e, k = wp.tid()
            b = mdl.sphere_body[k]
            x = (xpos[e, b] + wp.quat_rotate(xrot[e, b], mdl.sphere_pos[k])
                 - vec3(real(0.0), real(0.0), mdl.sphere_radius[k]))
            c = x[2]
            height[e, k] = c
            # the logistic written so exp never overflows (a sphere metres above the ground: s = 0, ds/dc = 0)
            kc = mdl.solver[KAPPA] * c
            if kc > real(0.0):
                ex = wp.exp(-kc)
                smooth[e, k] = ex / (real(1.0) + ex)
            else:
                smooth[e, k] = real(1.0) / (real(1.0) + wp.exp(kc))
            arm = x - vec3(q[e, 0], q[e, 1], q[e, 2])
            for t in range(mdl.contact_dof_start[k], mdl.contact_dof_start[k + 1]):
                d = mdl.contact_dof_d[t]
                col = s_lin[e, d] + wp.cross(s_ang[e, d], arm)
                jt[e, t] = vec3(col[2], col[0], col[1])
        return contact_geometry

    @cached_property
    def normal_velocity_bias(self):
        real = self.T.real

        @self.func
        def normal_velocity_bias(c: real, smooth: real, h: real, speculative: real, stabilization: real):
            """What the normal row adds to the contact velocity the impulses drive to zero [m/s]:
            c / h (w - (w - beta) s_k(c)), w = speculative, beta = stabilization, s_k the contact smoothing.
            Above the ground (c >> 1/k) it is w c / h: the sphere may approach at up to that speed before any
            impulse acts (at w = 1 it just reaches the surface within the substep); below (c << -1/k) it is
            beta c / h: that fraction of the penetration is pushed out per substep; s_k blends the two over
            the same transition width as the impulse smoothing, so the bias is smooth in c."""
            return c / h * (speculative - (speculative - stabilization) * smooth)
        return normal_velocity_bias

    @cached_property
    def free_contact_velocity(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        normal_velocity_bias = self.normal_velocity_bias

        @self.kernel
        def free_contact_velocity(
            mdl: DeviceModel, h: real, biased: int, jt: wp.array2d(dtype=vec3), qd: wp.array2d(dtype=real),
            qdd_free: wp.array2d(dtype=real), height: wp.array2d(dtype=real), smooth: wp.array2d(dtype=real),
            v_free: wp.array2d(dtype=real),
        ):
            """v_free[:, 3k + a] = J_(k,a) (qd + h qdd_free) [m/s], the contact velocity without contact
            impulses, plus (biased == 1, the "speculative" model) `normal_velocity_bias` of the sphere's height
            [m] on its normal row; biased == 0 (the "paper" model): the velocity alone."""
            e, k = wp.tid()
            if biased == 1:
                bias = normal_velocity_bias(height[e, k], smooth[e, k], h, mdl.solver[CONTACT_SPECULATIVE],
                                            mdl.solver[CONTACT_STABILIZATION])
                wp.atomic_add(v_free, e, 3 * k, bias)
            for t in range(mdl.contact_dof_start[k], mdl.contact_dof_start[k + 1]):
                d = mdl.contact_dof_d[t]
                v = jt[e, t] * (qd[e, d] + h * qdd_free[e, d])
                wp.atomic_add(v_free, e, 3 * k, v[0])
                wp.atomic_add(v_free, e, 3 * k + 1, v[1])
                wp.atomic_add(v_free, e, 3 * k + 2, v[2])
        return free_contact_velocity

    @cached_property
    def generalised_impulse(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel
        def generalised_impulse(
            mdl: DeviceModel, jt: wp.array2d(dtype=vec3), impulse: wp.array2d(dtype=vec3), out: wp.array2d(dtype=real),
        ):
            """out = J^T (s p) [N m s or N s], the contact impulses in generalised coordinates."""
            e, k = wp.tid()
            for t in range(mdl.contact_dof_start[k], mdl.contact_dof_start[k + 1]):
                wp.atomic_add(out, e, mdl.contact_dof_d[t], wp.dot(jt[e, t], impulse[e, k]))
        return generalised_impulse
