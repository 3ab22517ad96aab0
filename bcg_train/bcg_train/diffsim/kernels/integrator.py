"""Warp kernels that close a substep: the velocity and position update, and the non-finite check."""
from functools import cached_property

import warp as wp

from ..precision import WarpDefinitions
from .device_model import DeviceModelStruct


class IntegratorKernels(WarpDefinitions):
    """The kernels that close a substep, in one precision (see diffsim.precision)."""

    @cached_property
    def integrate(self):
        real, vec3, quat = self.T.real, self.T.vec3, self.T.quat
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel
        def integrate(mdl: DeviceModel, h: real, q: wp.array2d(dtype=real), qd: wp.array2d(dtype=real),
                      qdd_free: wp.array2d(dtype=real), dqd_contact: wp.array2d(dtype=real),
                      q_out: wp.array2d(dtype=real), qd_out: wp.array2d(dtype=real)):
            """qd+ = qd + h A^-1 f + A^-1 J^T (s p); semi-implicit Euler: joints q += h qd+, base position
            += h v, base orientation r <- normalize(r exp(h w_body / 2)), w_body the body-frame angular
            velocity (MuJoCo's convention)."""
            e = wp.tid()
            for d in range(mdl.nv):
                qd_out[e, d] = qd[e, d] + h * qdd_free[e, d] + dqd_contact[e, d]
            for i in range(3):
                q_out[e, i] = q[e, i] + h * qd_out[e, i]
            half = vec3(qd_out[e, 3], qd_out[e, 4], qd_out[e, 5]) * (real(0.5) * h)
            t2 = wp.dot(half, half)
            # Below t^2 = 1e-12 (half-angle t < 1e-6 rad) the series' next terms (t^4 / 120, t^4 / 24, ~1e-26)
            # are far below float32's 6e-8 (float64's 1.1e-16), so the truncated series is exact; it keeps
            # sin(t) / t and its adjoint away from 0 / 0 at rest.
            sinc = real(1.0) - t2 / real(6.0)
            cos = real(1.0) - t2 / real(2.0)
            if t2 > real(1.0e-12):
                t = wp.sqrt(t2)
                sinc = wp.sin(t) / t
                cos = wp.cos(t)
            dq = quat(half[0] * sinc, half[1] * sinc, half[2] * sinc, cos)
            r = wp.normalize(wp.mul(quat(q[e, 4], q[e, 5], q[e, 6], q[e, 3]), dq))
            q_out[e, 3] = r[3]
            q_out[e, 4] = r[0]
            q_out[e, 5] = r[1]
            q_out[e, 6] = r[2]
            for d in range(6, mdl.nv):
                q_out[e, d + 1] = q[e, d + 1] + h * qd_out[e, d]
        return integrate

    @cached_property
    def nonfinite_flags(self):
        real = self.T.real

        @self.kernel(enable_backward=False)
        def nonfinite_flags(q: wp.array2d(dtype=real), qd: wp.array2d(dtype=real), flags: wp.array(dtype=int)):
            """flags[e] = 1 where any coordinate or velocity of environment e is NaN or infinite."""
            e = wp.tid()
            bad = int(0)
            for i in range(q.shape[1]):
                if not wp.isfinite(q[e, i]):
                    bad = 1
            for i in range(qd.shape[1]):
                if not wp.isfinite(qd[e, i]):
                    bad = 1
            flags[e] = bad
        return nonfinite_flags
