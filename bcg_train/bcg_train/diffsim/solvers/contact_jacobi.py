"""Projected Jacobi iterations on the smoothed contact impulses: the paper's solver (docs/method.md,
"Contact model"; `SimConfig.contact_model` "paper"), with an exact hand-written adjoint recorded on the tape.

Per substep, from p = 0, `iterations` simultaneous steps over every contact row:
    z = p - r (v_free + G (s p)),   p <- proj(z),   r_b = omega / G_bb,
sphere k's three rows (normal z, tangents x, y) projected onto normal >= 0 and the Coulomb cone
|p_t| <= mu p_n; the applied impulse is s p. omega is `SimConfig.contact_relaxation` (`mdl.solver`).
Every row reads the previous iterate (Jacobi), unlike `contact_pgs`, whose rows read the spheres
already updated in the sweep. The smoothing s_k scales each impulse where it enters the residual, so a
sphere far above the floor (s_k ~ 0) gets only a small part of its impulse within the iterations.

Step: omega = 1 (the step 1 / G_bb of the diagonal) diverges on the G1 standing: the four spheres of a
foot are strongly coupled (the largest eigenvalue of diag(G)^-1 G is about 5 there), so the iteration
converges only where omega s_k < 2 / 5; `contact_relaxation` = 0.25 (one over the spheres per foot,
the constraint averaging of Warp's XPBD) converges at any s but leaves a part of the impulse unapplied
after 10 iterations where s_k < 1, which is what lets a sphere sink until its smoothing is near one
(bench/contact_models.py measures it).

The forward keeps p after every iteration, p_hist (N, iterations + 1, 3 nc), and the unprojected
updates z_hist (N, iterations, 3 nc); the adjoint undoes the iterations from them:
adj_z = P'(z)^T adj_p, then through r (G_bb), the residual into v_free, G and the previous s p.
"""
from functools import cached_property

import warp as wp

from ..kernels.device_model import CONTACT_RELAXATION, DeviceModelStruct
from ..precision import ScalarTypes, WarpDefinitions
from .contact_pgs import ContactPGS, PGSKernels


class JacobiKernels(WarpDefinitions):
    """The Jacobi solve's kernels, in one precision (see diffsim.precision)."""

    @cached_property
    def jacobi_forward(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        project = PGSKernels.of(self.T).project

        @self.kernel(enable_backward=False)
        def jacobi_forward(mdl: DeviceModel, iterations: int, g: wp.array3d(dtype=real), v_free: wp.array2d(dtype=real),
                           smooth: wp.array2d(dtype=real), sp: wp.array2d(dtype=real), p_hist: wp.array3d(dtype=real),
                           z_hist: wp.array3d(dtype=real), impulse: wp.array2d(dtype=vec3)):
            """p_hist[:, it] after `it` iterations (p_hist[:, 0] = 0), z_hist[:, it] the unprojected updates of
            iteration it; impulse[:, k] = s_k p_k (normal, x, y) [N s]."""
            e = wp.tid()
            nr = 3 * mdl.nc
            omega = mdl.solver[CONTACT_RELAXATION]
            for c in range(nr):
                p_hist[e, 0, c] = real(0.0)
            for it in range(iterations):
                for c in range(nr):
                    sp[e, c] = smooth[e, c / 3] * p_hist[e, it, c]
                for k in range(mdl.nc):
                    r0 = 3 * k
                    res = vec3(v_free[e, r0], v_free[e, r0 + 1], v_free[e, r0 + 2])
                    for c in range(nr):
                        res += vec3(g[e, r0, c], g[e, r0 + 1, c], g[e, r0 + 2, c]) * sp[e, c]
                    z = vec3()
                    for b in range(3):
                        z[b] = p_hist[e, it, r0 + b] - omega * res[b] / g[e, r0 + b, r0 + b]
                    p = project(z, mdl.sphere_friction[k])
                    for b in range(3):
                        z_hist[e, it, r0 + b] = z[b]
                        p_hist[e, it + 1, r0 + b] = p[b]
            for k in range(mdl.nc):
                s = smooth[e, k]
                impulse[e, k] = vec3(s * p_hist[e, iterations, 3 * k], s * p_hist[e, iterations, 3 * k + 1],
                                     s * p_hist[e, iterations, 3 * k + 2])
        return jacobi_forward

    @cached_property
    def jacobi_adjoint_iterations(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        project_adjoint = PGSKernels.of(self.T).project_adjoint
        seed_adjoint = PGSKernels.of(self.T).seed_adjoint

        @self.kernel(enable_backward=False)
        def jacobi_adjoint_iterations(mdl: DeviceModel, iterations: int, g: wp.array3d(dtype=real),
                                      smooth: wp.array2d(dtype=real), p_hist: wp.array3d(dtype=real),
                                      z_hist: wp.array3d(dtype=real), adj_impulse: wp.array2d(dtype=vec3),
                                      adj_next: wp.array2d(dtype=real), adj_cur: wp.array2d(dtype=real),
                                      adj_res_hist: wp.array3d(dtype=real), adj_g: wp.array3d(dtype=real),
                                      adj_v: wp.array2d(dtype=real), adj_s: wp.array2d(dtype=real)):
            """Reverse iterations. adj_next holds d/d p after the iteration being undone, adj_cur d/d p before
            it; the adjoint of each row's residual goes to adj_res_hist (its G term is summed in
            jacobi_adjoint_g); the step's dependence on G_bb goes to adj_g's diagonal here."""
            e = wp.tid()
            nc = mdl.nc
            nr = 3 * nc
            omega = mdl.solver[CONTACT_RELAXATION]
            seed_adjoint(e, nc, iterations, smooth, p_hist, adj_impulse, adj_next, adj_s)
            for itr in range(iterations):
                it = iterations - 1 - itr
                for k in range(nc):
                    r0 = 3 * k
                    z = vec3(z_hist[e, it, r0], z_hist[e, it, r0 + 1], z_hist[e, it, r0 + 2])
                    adj_z = project_adjoint(z, mdl.sphere_friction[k],
                                             vec3(adj_next[e, r0], adj_next[e, r0 + 1], adj_next[e, r0 + 2]))
                    # z_b = p_b - omega res_b / G_bb
                    for b in range(3):
                        r = r0 + b
                        gbb = g[e, r, r]
                        res = (p_hist[e, it, r] - z[b]) * gbb / omega
                        adj_cur[e, r] = adj_z[b]
                        adj_g[e, r, r] += adj_z[b] * omega * res / (gbb * gbb)
                        adj_res = -omega * adj_z[b] / gbb
                        adj_v[e, r] += adj_res
                        adj_res_hist[e, it, r] = adj_res
                # res = v_free + G (s p): p of iteration it, for every row
                for c in range(nr):
                    adj_sp = real(0.0)
                    for r in range(nr):
                        adj_sp += g[e, r, c] * adj_res_hist[e, it, r]
                    adj_s[e, c / 3] += adj_sp * p_hist[e, it, c]
                    adj_cur[e, c] += smooth[e, c / 3] * adj_sp
                for c in range(nr):
                    adj_next[e, c] = adj_cur[e, c]
        return jacobi_adjoint_iterations

    @cached_property
    def jacobi_adjoint_g(self):
        real = self.T.real

        @self.kernel(enable_backward=False)
        def jacobi_adjoint_g(iterations: int, smooth: wp.array2d(dtype=real), p_hist: wp.array3d(dtype=real),
                             adj_res_hist: wp.array3d(dtype=real), adj_g: wp.array3d(dtype=real)):
            """adj_G[r, c] += sum over iterations of adj_res[r] * (s p)_c of the iteration's input."""
            e, r, c = wp.tid()
            acc = real(0.0)
            for it in range(iterations):
                acc += adj_res_hist[e, it, r] * p_hist[e, it, c]
            adj_g[e, r, c] += acc * smooth[e, c / 3]
        return jacobi_adjoint_g


class ContactJacobi(ContactPGS):
    """The solve for up to `capacity` environments (the first `rows` of them are solved), as
    `ContactPGS` (the same arguments and buffers), by projected Jacobi iterations."""

    @staticmethod
    def kernels(types: ScalarTypes) -> tuple:
        """The solve's (forward, adjoint_sweeps, adjoint_g) kernels in `types`' precision."""
        k = JacobiKernels.of(types)
        return k.jacobi_forward, k.jacobi_adjoint_iterations, k.jacobi_adjoint_g

    @staticmethod
    def adjoint_g_dims(rows: int, g: wp.array) -> tuple:
        """The launch dimensions of `adjoint_g`: one thread per environment and entry of G."""
        return (rows, g.shape[1], g.shape[2])
