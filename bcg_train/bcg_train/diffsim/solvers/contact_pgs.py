"""Projected Gauss-Seidel on the smoothed contact impulses (docs/method.md, "Contact model"), with an exact
hand-written adjoint recorded on the tape.

Per substep, from p = 0, `iterations` sweeps over the spheres; sphere k's three rows (normal z,
tangents x, y) take the step p_k <- proj(p_k - D_k^-1 (v_free + G (s p))_k), D_k = diag(G_kk), with
the spheres before k already updated in this sweep (Gauss-Seidel order), then the projection onto
normal >= 0 and the Coulomb cone |p_t| <= mu p_n. The applied impulse is s p. The smoothing s_k(c)
scales each impulse where it enters the residual, so a far sphere pushes back only weakly.

Why Gauss-Seidel (a deviation from the paper's Jacobi step (docs/method.md)): measured on the G1 standing, the
simultaneous (Jacobi) form with the diagonal step diverges (the four spheres of a foot are strongly
coupled), and with a step bounded by the row sum it leaves the heavy whole-robot mode unconverged
after 10 iterations, so the feet sink steadily (12 mm/s at kappa 300). The paper's Jacobi iterations, with
its law (no velocity bias), are the "paper" contact model (solvers.contact_jacobi, `SimConfig.contact_model`).

The forward keeps p after every sweep, p_hist (N, iterations + 1, 3 nc), and the unprojected updates
z_hist (N, iterations, 3 nc); the adjoint undoes the sweeps from them: for each sphere step,
adj_z = P'(z)^T adj_p_k, then through the residual into v_free, s and the p values the step read;
the residual adjoints are kept per sweep and summed into adj_G by one parallel kernel.
"""
from functools import cached_property
from typing import Optional

import warp as wp

from ..kernels.device_model import DeviceModelStruct
from ..kernels.launch import LaunchSites
from ..precision import ScalarTypes, WarpDefinitions


class PGSKernels(WarpDefinitions):
    """The Gauss-Seidel solve's kernels, in one precision (see diffsim.precision)."""

    @cached_property
    def _sphere_step(self):
        real, vec3 = self.T.real, self.T.vec3

        @self.func
        def _sphere_step(e: int, k: int, it: int, nr: int, g: wp.array3d(dtype=real), v_free: wp.array2d(dtype=real),
                         sp: wp.array2d(dtype=real), p_hist: wp.array3d(dtype=real)):
            """Unprojected update z = p_k - D_k^-1 (v_free + G (s p))_k of sphere k, with sp the current s * p
            (spheres < k from sweep it + 1, the others from sweep it)."""
            r0 = 3 * k
            res = vec3(v_free[e, r0], v_free[e, r0 + 1], v_free[e, r0 + 2])
            for c in range(nr):
                res += vec3(g[e, r0, c], g[e, r0 + 1, c], g[e, r0 + 2, c]) * sp[e, c]
            return vec3(p_hist[e, it, r0] - res[0] / g[e, r0, r0],
                        p_hist[e, it, r0 + 1] - res[1] / g[e, r0 + 1, r0 + 1],
                        p_hist[e, it, r0 + 2] - res[2] / g[e, r0 + 2, r0 + 2])
        return _sphere_step

    @cached_property
    def project(self):
        real, vec3 = self.T.real, self.T.vec3

        @self.func
        def project(z: vec3, mu: real):
            """Normal >= 0, then tangents into the cone |t| <= mu n."""
            pn = wp.max(z[0], real(0.0))
            lim = mu * pn
            tn2 = z[1] * z[1] + z[2] * z[2]
            if tn2 > lim * lim:
                s = real(0.0)
                if tn2 > real(0.0):
                    s = lim / wp.sqrt(tn2)
                return vec3(pn, z[1] * s, z[2] * s)
            return vec3(pn, z[1], z[2])
        return project

    @cached_property
    def project_adjoint(self):
        real, vec3 = self.T.real, self.T.vec3

        @self.func
        def project_adjoint(z: vec3, mu: real, adj: vec3):
            """P'(z)^T adj for `project`."""
            if z[0] <= real(0.0):
                return vec3(real(0.0), real(0.0), real(0.0))
            lim = mu * z[0]
            tn2 = z[1] * z[1] + z[2] * z[2]
            if tn2 <= lim * lim:
                return adj
            tn = wp.sqrt(tn2)
            u1 = z[1] / tn
            u2 = z[2] / tn
            # t_out = lim * u: d/dn = mu u; d/dt = (lim / |t|) (I - u u^T)
            along = adj[1] * u1 + adj[2] * u2
            return vec3(adj[0] + mu * along, lim / tn * (adj[1] - along * u1), lim / tn * (adj[2] - along * u2))
        return project_adjoint

    @cached_property
    def seed_adjoint(self):
        real, vec3 = self.T.real, self.T.vec3

        @self.func
        def seed_adjoint(e: int, nc: int, iterations: int, smooth: wp.array2d(dtype=real),
                         p_hist: wp.array3d(dtype=real), adj_impulse: wp.array2d(dtype=vec3),
                         adj_next: wp.array2d(dtype=real), adj_s: wp.array2d(dtype=real)):
            """The adjoint of impulse_k = s_k p_k, p the final iterate (p_hist[:, iterations]), that the
            reverse sweeps (or iterations) start from: adj_s[e, k] += adj_impulse_k . p_k and
            adj_next[e] <- d/d p = s adj_impulse."""
            for k in range(nc):
                pk = vec3(p_hist[e, iterations, 3 * k], p_hist[e, iterations, 3 * k + 1],
                          p_hist[e, iterations, 3 * k + 2])
                adj_s[e, k] += wp.dot(adj_impulse[e, k], pk)
                a = adj_impulse[e, k] * smooth[e, k]
                for b in range(3):
                    adj_next[e, 3 * k + b] = a[b]
        return seed_adjoint

    @cached_property
    def pgs_forward(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        _sphere_step, project = self._sphere_step, self.project

        @self.kernel(enable_backward=False)
        def pgs_forward(mdl: DeviceModel, iterations: int, g: wp.array3d(dtype=real), v_free: wp.array2d(dtype=real),
                        smooth: wp.array2d(dtype=real), sp: wp.array2d(dtype=real), p_hist: wp.array3d(dtype=real),
                        z_hist: wp.array3d(dtype=real), impulse: wp.array2d(dtype=vec3)):
            """p_hist[:, it] after `it` sweeps (p_hist[:, 0] = 0), z_hist[:, it] the unprojected updates of
            sweep it; impulse[:, k] = s_k p_k (normal, x, y) [N s]."""
            e = wp.tid()
            nr = 3 * mdl.nc
            for c in range(nr):
                p_hist[e, 0, c] = real(0.0)
                sp[e, c] = real(0.0)
            for it in range(iterations):
                for k in range(mdl.nc):
                    z = _sphere_step(e, k, it, nr, g, v_free, sp, p_hist)
                    p = project(z, mdl.sphere_friction[k])
                    for b in range(3):
                        z_hist[e, it, 3 * k + b] = z[b]
                        p_hist[e, it + 1, 3 * k + b] = p[b]
                        sp[e, 3 * k + b] = smooth[e, k] * p[b]
            for k in range(mdl.nc):
                impulse[e, k] = vec3(sp[e, 3 * k], sp[e, 3 * k + 1], sp[e, 3 * k + 2])
        return pgs_forward

    @cached_property
    def pgs_adjoint_sweeps(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        project_adjoint, seed_adjoint = self.project_adjoint, self.seed_adjoint

        @self.kernel(enable_backward=False)
        def pgs_adjoint_sweeps(mdl: DeviceModel, iterations: int, g: wp.array3d(dtype=real),
                               smooth: wp.array2d(dtype=real), p_hist: wp.array3d(dtype=real),
                               z_hist: wp.array3d(dtype=real), adj_impulse: wp.array2d(dtype=vec3),
                               adj_next: wp.array2d(dtype=real), adj_cur: wp.array2d(dtype=real),
                               adj_res_hist: wp.array3d(dtype=real), adj_g: wp.array3d(dtype=real),
                               adj_v: wp.array2d(dtype=real), adj_s: wp.array2d(dtype=real)):
            """Reverse sweeps. adj_next holds d/d p after the sweep being undone, adj_cur d/d p before it; the
            adjoint of each step's residual goes to adj_res_hist (its G term is summed in pgs_adjoint_g)."""
            e = wp.tid()
            nc = mdl.nc
            nr = 3 * nc
            seed_adjoint(e, nc, iterations, smooth, p_hist, adj_impulse, adj_next, adj_s)
            for itr in range(iterations):
                it = iterations - 1 - itr
                for c in range(nr):
                    adj_cur[e, c] = real(0.0)
                for kr in range(nc):
                    k = nc - 1 - kr
                    r0 = 3 * k
                    z = vec3(z_hist[e, it, r0], z_hist[e, it, r0 + 1], z_hist[e, it, r0 + 2])
                    adj_z = project_adjoint(z, mdl.sphere_friction[k],
                                             vec3(adj_next[e, r0], adj_next[e, r0 + 1], adj_next[e, r0 + 2]))
                    # z_b = p_old_b - res_b / G_bb, res = v_free + G sp
                    adj_res = vec3()
                    for b in range(3):
                        r = r0 + b
                        gbb = g[e, r, r]
                        res = (p_hist[e, it, r] - z[b]) * gbb
                        adj_cur[e, r] += adj_z[b]
                        adj_g[e, r, r] += adj_z[b] * res / (gbb * gbb)
                        adj_res[b] = -adj_z[b] / gbb
                        adj_v[e, r] += adj_res[b]
                        adj_res_hist[e, it, r] = adj_res[b]
                    # sp_c = s_c p_c, p_c from sweep it + 1 for the spheres before k, else from sweep it
                    for other in range(nc):
                        c = 3 * other
                        adj_sp = vec3()
                        for b in range(3):
                            adj_sp[b] = (adj_res[0] * g[e, r0, c + b] + adj_res[1] * g[e, r0 + 1, c + b]
                                         + adj_res[2] * g[e, r0 + 2, c + b])
                        src = it
                        if other < k:
                            src = it + 1
                        adj_s[e, other] += wp.dot(adj_sp, vec3(p_hist[e, src, c], p_hist[e, src, c + 1],
                                                               p_hist[e, src, c + 2]))
                        adj_sp *= smooth[e, other]
                        for b in range(3):
                            if other < k:
                                adj_next[e, c + b] += adj_sp[b]
                            else:
                                adj_cur[e, c + b] += adj_sp[b]
                for c in range(nr):
                    adj_next[e, c] = adj_cur[e, c]
        return pgs_adjoint_sweeps

    @cached_property
    def pgs_adjoint_g(self):
        real, vec3 = self.T.real, self.T.vec3

        @self.kernel(enable_backward=False)
        def pgs_adjoint_g(iterations: int, smooth: wp.array2d(dtype=real), p_hist: wp.array3d(dtype=real),
                          adj_res_hist: wp.array3d(dtype=real), adj_g: wp.array3d(dtype=real)):
            """Row r of adj_G: adj_G[r, c] += sum over sweeps of adj_res[r] * (s p)_c as row r's step read it
            (p from sweep it + 1 for the spheres before r's, else from sweep it); three columns at a time."""
            e, r = wp.tid()
            k = r / 3
            for other in range(adj_g.shape[2] / 3):
                newer = 0
                if other < k:
                    newer = 1
                c = 3 * other
                acc = vec3()
                for it in range(iterations):
                    src = it + newer
                    p = vec3(p_hist[e, src, c], p_hist[e, src, c + 1], p_hist[e, src, c + 2])
                    acc += adj_res_hist[e, it, r] * p
                acc *= smooth[e, other]
                for b in range(3):
                    adj_g[e, r, c + b] += acc[b]
        return pgs_adjoint_g


class ContactPGS:
    """The solve for up to `capacity` environments (the first `rows` of them are solved): its
    iterates, kept for the adjoint, its backward work arrays and its launch sites (see kernels.launch).
    sp (capacity, 3 nc) is scratch; p_hist (capacity, iterations + 1, 3 nc) and z_hist (capacity,
    iterations, 3 nc) are the sweeps the adjoint undoes. A solver by other iterations with the same
    buffers names its own kernels (`kernels`) and `adjoint_g_dims`. Floats in `types`' precision."""

    def __init__(self, nc: int, iterations: int, capacity: int, device: str, types: ScalarTypes):
        nr = 3 * nc
        real = self.real = types.real
        self.device, self.rows = device, capacity
        self.forward, self.adjoint_sweeps, self.adjoint_g = self.kernels(types)
        self.sp = wp.zeros((capacity, nr), dtype=real, device=device)
        self.p_hist = wp.zeros((capacity, iterations + 1, nr), dtype=real, device=device)
        self.z_hist = wp.zeros((capacity, iterations, nr), dtype=real, device=device)
        self.launches = LaunchSites(device)
        self._adj_next = self._adj_cur = self._adj_res_hist = None

    @staticmethod
    def kernels(types: ScalarTypes) -> tuple:
        """The solve's (forward, adjoint_sweeps, adjoint_g) kernels in `types`' precision."""
        k = PGSKernels.of(types)
        return k.pgs_forward, k.pgs_adjoint_sweeps, k.pgs_adjoint_g

    def solve(self, mdl, g: wp.array, v_free: wp.array, smooth: wp.array, impulse: wp.array,
              tape: Optional[wp.Tape]) -> None:
        """impulse (rows, nc) vec3 [N s] from `mdl` (the DeviceModel), G (rows, 3 nc, 3 nc), v_free
        (rows, 3 nc) [m/s], smooth (rows, nc); the adjoint is recorded on `tape` (None: no gradient)."""
        rows, iters = self.rows, self.z_hist.shape[1]
        self.launches(self.forward, rows, [mdl, iters, g, v_free, smooth, self.sp, self.p_hist, self.z_hist, impulse])
        if tape is None or impulse.grad is None:
            return
        sweeps, columns = self.launches.site(self.adjoint_sweeps), self.launches.site(self.adjoint_g)

        def backward():
            if self._adj_res_hist is None:   # work arrays, written before they are read
                self._adj_next = wp.empty(self.sp.shape, dtype=self.real, device=self.device)
                self._adj_cur = wp.empty(self.sp.shape, dtype=self.real, device=self.device)
                self._adj_res_hist = wp.empty(self.z_hist.shape, dtype=self.real, device=self.device)
            sweeps(rows, [mdl, iters, g, smooth, self.p_hist, self.z_hist, impulse.grad, self._adj_next,
                          self._adj_cur, self._adj_res_hist, g.grad, v_free.grad, smooth.grad])
            columns(self.adjoint_g_dims(rows, g), [iters, smooth, self.p_hist, self._adj_res_hist, g.grad])

        tape.record_func(backward=backward, arrays=[g, v_free, smooth, impulse])

    @staticmethod
    def adjoint_g_dims(rows: int, g: wp.array) -> tuple:
        """The launch dimensions of `adjoint_g`: one thread per environment and row of G."""
        return (rows, g.shape[1])
