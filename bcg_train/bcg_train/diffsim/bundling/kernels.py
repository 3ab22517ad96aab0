"""Warp kernels of Bundled Contact Gradients (see bundling.py for the algorithm).

Row index conventions: a "batch" is a set of rows of states (N, nq) / (N, nv) / (N, nc); `src[i]` maps
row i of an output batch to a row of an input batch. Perturbations are constants: computed by
kernels without adjoints and added to differentiable copies, so no gradient flows through sampling.
"""
from functools import cached_property

import warp as wp

from ..kernels.device_model import DeviceModelStruct
from ..precision import WarpDefinitions

blocks43 = wp.types.matrix(shape=(4, 3), dtype=wp.float64)
"""Per perturbation block (leg 0 position, leg 0 velocity, leg 1 position, leg 1 velocity) 3 components."""

NOISE_PER_ROW = 12
"""Standard normal draws of one perturbation row: per leg (left, right) 3 for the foot position, then
3 for its velocity (`foot_perturbation`'s `noise`)."""


class BundlingKernels(WarpDefinitions):
    """The bundling kernels, in one precision (see diffsim.precision)."""

    @cached_property
    def leg_loads(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel(enable_backward=False)
        def leg_loads(mdl: DeviceModel, impulse: wp.array2d(dtype=vec3), threshold: real, onset_level: real,
                      loads: wp.array2d(dtype=int)):
            """loads[i, leg] = 2 where a sphere of `leg` carries a normal impulse above `threshold` [N s] in row
            i, else 1 where one carries more than `onset_level` [N s], else 0."""
            i, leg = wp.tid()
            top = real(0.0)
            for k in range(mdl.nc):
                if mdl.sphere_leg[k] == leg:
                    top = wp.max(top, impulse[i, k][0])
            load = int(0)
            if top > threshold:
                load = 2
            elif top > onset_level:
                load = 1
            loads[i, leg] = load
        return leg_loads

    @cached_property
    def solve_spd6(self):
        spatial_vector, spatial_matrix = self.T.spatial_vector, self.T.spatial_matrix

        @self.func
        def solve_spd6(a: spatial_matrix, b: spatial_vector):
            """a^-1 b for a symmetric positive definite 6 x 6 matrix (Cholesky)."""
            low = spatial_matrix()
            for i in range(6):
                for j in range(i + 1):
                    s = a[i, j]
                    for k in range(j):
                        s -= low[i, k] * low[j, k]
                    if i == j:
                        low[i, i] = wp.sqrt(s)
                    else:
                        low[i, j] = s / low[j, j]
            y = spatial_vector()
            for i in range(6):
                s = b[i]
                for k in range(i):
                    s -= low[i, k] * y[k]
                y[i] = s / low[i, i]
            x = spatial_vector()
            for ii in range(6):
                i = 5 - ii
                s = y[i]
                for k in range(i + 1, 6):
                    s -= low[k, i] * x[k]
                x[i] = s / low[i, i]
            return x
        return solve_spd6

    @cached_property
    def foot_column(self):
        vec3, spatial_vector = self.T.vec3, self.T.spatial_vector

        @self.func
        def foot_column(s_lin: vec3, s_ang: vec3, arm: vec3):
            """Column of the 6-D foot Jacobian for one hinge: (velocity of the foot point, angular velocity)."""
            v = s_lin + wp.cross(s_ang, arm)
            return spatial_vector(v[0], v[1], v[2], s_ang[0], s_ang[1], s_ang[2])
        return foot_column

    @cached_property
    def foot_perturbation(self):
        real, vec3, quat, spatial_vector = self.T.real, self.T.vec3, self.T.quat, self.T.spatial_vector
        spatial_matrix = self.T.spatial_matrix
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        solve_spd6, foot_column = self.solve_spd6, self.foot_column

        @self.kernel(enable_backward=False)
        def foot_perturbation(
            mdl: DeviceModel, q: wp.array2d(dtype=real), xrot: wp.array2d(dtype=quat), xpos: wp.array2d(dtype=vec3),
            s_ang: wp.array2d(dtype=vec3), s_lin: wp.array2d(dtype=vec3), vel_ang: wp.array2d(dtype=vec3),
            vel_lin: wp.array2d(dtype=vec3), src: wp.array(dtype=int), legs: wp.array2d(dtype=int), seed: int,
            seed_offset: wp.array(dtype=int),
            sigma_p: real, sigma_v: real, sigma_v_per_speed: real, damping: real, max_dq: real, max_dqd: real,
            dq: wp.array2d(dtype=real), dqd: wp.array2d(dtype=real), clamped: wp.array(dtype=int),
            approach: wp.array(dtype=wp.float64), keep_noise: int, noise: wp.array2d(dtype=real),
            response: wp.array3d(dtype=real), scales: wp.array2d(dtype=real),
        ):
            """Joint perturbation of output row i on `leg` (when legs[i, leg] == 1), from the kinematics of input
            row src[i]: the foot translates, its point p (mean of the leg's sphere bottoms) by dp ~ N(0, sigma_p^2 I)
            and at dv ~ N(0, s_v^2 I), s_v = sigma_v + sigma_v_per_speed x u [m/s] with u = max(0, -v_z) the
            foot point's approach speed towards the floor [m/s] (from the body velocities vel_ang/vel_lin,
            spatial, referred to the base origin), its orientation held (zero angular part), mapped to the leg's
            hinge dofs by the damped pseudo-inverse J^T (J J^T + damping I)^-1 of the analytic 6-D foot Jacobian
            J (6 x leg dofs), then clamped to +-max_dq [rad] / +-max_dqd [rad/s]; clamped[0] counts the
            perturbations a clamp cut; approach[0] adds u and approach[1] one per perturbed leg. dq, dqd: (rows,
            nv), zero elsewhere. The stream is seed + seed_offset[0] (a number that differs per launch, the host
            bundler's seed mixed with its event counter, and one read on the device, the device bundler's
            substep counter, or zero).
            With keep_noise == 1 it also keeps what the zero-order estimate needs (`alpha_order_mix`): the
            draws noise[i, 6 leg + (0..2 position, 3..5 velocity)] (rows, NOISE_PER_ROW), the leg's unit
            response response[i, d, k] = J^T (J J^T + damping I)^-1 e_k for its hinge dofs d (rows, nv, 3;
            before the stds and the clamp) and the stds scales[i, 2 leg + (0 position, 1 velocity)] (rows, 4)."""
            i, leg = wp.tid()
            if legs[i, leg] == 0:
                return
            r = src[i]
            o = vec3(q[r, 0], q[r, 1], q[r, 2])
            p = vec3()
            v = vec3()
            count = real(0.0)
            for k in range(mdl.nc):
                if mdl.sphere_leg[k] == leg:
                    b = mdl.sphere_body[k]
                    bottom = (xpos[r, b] + wp.quat_rotate(xrot[r, b], mdl.sphere_pos[k])
                              - vec3(real(0.0), real(0.0), mdl.sphere_radius[k]))
                    p += bottom
                    v += vel_lin[r, b] + wp.cross(vel_ang[r, b], bottom - o)
                    count += real(1.0)
            arm = p / count - o
            speed = wp.max(-v[2] / count, real(0.0))
            wp.atomic_add(approach, 0, wp.float64(speed))
            wp.atomic_add(approach, 1, wp.float64(1.0))
            jjt = spatial_matrix()
            for a in range(6):
                jjt[a, a] = damping
            for t in range(mdl.leg_dof_start[leg], mdl.leg_dof_start[leg + 1]):
                d = mdl.leg_dof[t]
                jjt += wp.outer(foot_column(s_lin[r, d], s_ang[r, d], arm), foot_column(s_lin[r, d], s_ang[r, d], arm))
            rng = wp.rand_init(seed + seed_offset[0], i * 2 + leg)
            zp = vec3(real(wp.randn(rng)), real(wp.randn(rng)), real(wp.randn(rng)))
            zv = vec3(real(wp.randn(rng)), real(wp.randn(rng)), real(wp.randn(rng)))
            sv = sigma_v + sigma_v_per_speed * speed
            dp = zp * sigma_p
            dv = zv * sv
            zero = real(0.0)
            yp = solve_spd6(jjt, spatial_vector(dp[0], dp[1], dp[2], zero, zero, zero))
            yv = solve_spd6(jjt, spatial_vector(dv[0], dv[1], dv[2], zero, zero, zero))
            cut = int(0)
            for t in range(mdl.leg_dof_start[leg], mdl.leg_dof_start[leg + 1]):
                d = mdl.leg_dof[t]
                col = foot_column(s_lin[r, d], s_ang[r, d], arm)
                x = wp.dot(col, yp)
                xd = wp.dot(col, yv)
                if wp.abs(x) > max_dq or wp.abs(xd) > max_dqd:
                    cut = 1
                dq[i, d] = wp.clamp(x, -max_dq, max_dq)
                dqd[i, d] = wp.clamp(xd, -max_dqd, max_dqd)
            if cut == 1:
                wp.atomic_add(clamped, 0, 1)
            if keep_noise == 1:
                for k in range(3):
                    noise[i, 6 * leg + k] = zp[k]
                    noise[i, 6 * leg + 3 + k] = zv[k]
                    e = spatial_vector(zero, zero, zero, zero, zero, zero)
                    e[k] = real(1.0)
                    y = solve_spd6(jjt, e)
                    for t in range(mdl.leg_dof_start[leg], mdl.leg_dof_start[leg + 1]):
                        d = mdl.leg_dof[t]
                        response[i, d, k] = wp.dot(foot_column(s_lin[r, d], s_ang[r, d], arm), y)
                scales[i, 2 * leg] = sigma_p
                scales[i, 2 * leg + 1] = sv
        return foot_perturbation

    @cached_property
    def perturbed_rows(self):
        real = self.T.real

        @self.kernel
        def perturbed_rows(q: wp.array2d(dtype=real), qd: wp.array2d(dtype=real), src: wp.array(dtype=int), first: int,
                           dq: wp.array2d(dtype=real), dqd: wp.array2d(dtype=real),
                           q_out: wp.array2d(dtype=real), qd_out: wp.array2d(dtype=real)):
            """Row first + i of the output = input row src[i] plus the constant perturbation row first + i
            (hinge coordinate j >= 7 is dof j - 1; the floating base is never perturbed)."""
            i, j = wp.tid()
            o = first + i
            r = src[i]
            if j < q.shape[1]:
                dx = real(0.0)
                if j >= 7:
                    dx = dq[o, j - 1]
                q_out[o, j] = q[r, j] + dx
            if j < qd.shape[1]:
                qd_out[o, j] = qd[r, j] + dqd[o, j]
        return perturbed_rows

    @cached_property
    def gather_control(self):
        real = self.T.real

        @self.kernel
        def gather_control(src: wp.array(dtype=int), q_target: wp.array2d(dtype=real),
                           qd_target: wp.array2d(dtype=real), kp: wp.array2d(dtype=real), kd: wp.array2d(dtype=real),
                           tau: wp.array2d(dtype=real), q_target_out: wp.array2d(dtype=real),
                           qd_target_out: wp.array2d(dtype=real), kp_out: wp.array2d(dtype=real),
                           kd_out: wp.array2d(dtype=real), tau_out: wp.array2d(dtype=real)):
            """Branch row i runs under the control of environment src[i] (same actions in every branch)."""
            i, j = wp.tid()
            e = src[i]
            q_target_out[i, j] = q_target[e, j]
            qd_target_out[i, j] = qd_target[e, j]
            kp_out[i, j] = kp[e, j]
            kd_out[i, j] = kd[e, j]
            tau_out[i, j] = tau[e, j]
        return gather_control

    @cached_property
    def select_rows(self):
        real, vec3 = self.T.real, self.T.vec3

        @self.kernel
        def select_rows(which: wp.array(dtype=int), src: wp.array(dtype=int), stack_at: int, add_offset: int,
                        q_a: wp.array2d(dtype=real), qd_a: wp.array2d(dtype=real), imp_a: wp.array2d(dtype=vec3),
                        h_a: wp.array2d(dtype=real),
                        q_b: wp.array2d(dtype=real), qd_b: wp.array2d(dtype=real), imp_b: wp.array2d(dtype=vec3),
                        h_b: wp.array2d(dtype=real),
                        q_off: wp.array2d(dtype=real), qd_off: wp.array2d(dtype=real), imp_off: wp.array2d(dtype=vec3),
                        h_off: wp.array2d(dtype=real), q_out: wp.array2d(dtype=real), qd_out: wp.array2d(dtype=real),
                        imp_out: wp.array2d(dtype=vec3), h_out: wp.array2d(dtype=real)):
            """Output row i = row src[i] of batch a (which[i] == 0) or of batch b (which[i] == 1); without
            indices (which and src empty) the batches stacked: a's first stack_at rows, then b's. Plus, for
            batch b rows when add_offset == 1, the constant offset row i (the nominal-forward ablation)."""
            i, j = wp.tid()
            side = int(0)
            r = i
            if which.shape[0] > 0:
                side = which[i]
                r = src[i]
            elif i >= stack_at:
                side = 1
                r = i - stack_at
            if side == 0:
                if j < q_a.shape[1]:
                    q_out[i, j] = q_a[r, j]
                if j < qd_a.shape[1]:
                    qd_out[i, j] = qd_a[r, j]
                if j < h_a.shape[1]:
                    imp_out[i, j] = imp_a[r, j]
                    h_out[i, j] = h_a[r, j]
            elif add_offset == 0:
                if j < q_b.shape[1]:
                    q_out[i, j] = q_b[r, j]
                if j < qd_b.shape[1]:
                    qd_out[i, j] = qd_b[r, j]
                if j < h_b.shape[1]:
                    imp_out[i, j] = imp_b[r, j]
                    h_out[i, j] = h_b[r, j]
            else:
                if j < q_b.shape[1]:
                    q_out[i, j] = q_b[r, j] + q_off[i, j]
                if j < qd_b.shape[1]:
                    qd_out[i, j] = qd_b[r, j] + qd_off[i, j]
                if j < h_b.shape[1]:
                    imp_out[i, j] = imp_b[r, j] + imp_off[i, j]
                    h_out[i, j] = h_b[r, j] + h_off[i, j]
        return select_rows

    @cached_property
    def branch_mean(self):
        real, vec3, quat = self.T.real, self.T.vec3, self.T.quat

        @self.kernel
        def branch_mean(first: wp.array(dtype=int), count: wp.array(dtype=int), q: wp.array2d(dtype=real),
                        qd: wp.array2d(dtype=real), imp: wp.array2d(dtype=vec3), height: wp.array2d(dtype=real),
                        probed: int, probe: wp.array(dtype=real),
                        q_sum: wp.array2d(dtype=real), q_mean: wp.array2d(dtype=real), qd_mean: wp.array2d(dtype=real),
                        imp_mean: wp.array2d(dtype=vec3), h_mean: wp.array2d(dtype=real)):
            """Slot w: mean of its branches (rows first[w] .. first[w] + count[w] - 1). The base quaternions are
            sign-aligned with the first branch's, averaged and renormalised (one branch: copied as is).
            Accumulators zeroed. With probed == 1 each branch's terms are weighted by probe[i] (ones: the
            same values; the adjoint of probe[i] is then branch i's share of the loss through this mean, which
            `alpha_order_mix` reads)."""
            w = wp.tid()
            b0 = first[w]
            branches = count[w]
            inv = real(1.0) / real(branches)
            for b in range(branches):
                i = b0 + b
                sign = real(1.0)
                if q[i, 3] * q[b0, 3] + q[i, 4] * q[b0, 4] + q[i, 5] * q[b0, 5] + q[i, 6] * q[b0, 6] < real(0.0):
                    sign = real(-1.0)
                weight = real(1.0)            # x 1 leaves every value as it is
                if probed == 1:
                    weight = probe[i]
                for j in range(q.shape[1]):
                    v = q[i, j] * weight
                    if j >= 3 and j < 7:
                        v = v * sign
                    wp.atomic_add(q_sum, w, j, v)
                for j in range(qd.shape[1]):
                    wp.atomic_add(qd_mean, w, j, qd[i, j] * inv * weight)
                for k in range(height.shape[1]):
                    wp.atomic_add(imp_mean, w, k, imp[i, k] * inv * weight)
                    wp.atomic_add(h_mean, w, k, height[i, k] * inv * weight)
            for j in range(q.shape[1]):
                if j < 3 or j >= 7:
                    q_mean[w, j] = q_sum[w, j] * inv
            rot = quat(q_sum[w, 4], q_sum[w, 5], q_sum[w, 6], q_sum[w, 3])
            if branches > 1:
                rot = wp.normalize(rot)
            q_mean[w, 3] = rot[3]
            q_mean[w, 4] = rot[0]
            q_mean[w, 5] = rot[1]
            q_mean[w, 6] = rot[2]
        return branch_mean

    @cached_property
    def select_probe(self):
        real = self.T.real

        @self.kernel
        def select_probe(which: wp.array(dtype=int), src: wp.array(dtype=int), p_a: wp.array(dtype=real),
                         p_b: wp.array(dtype=real), p_out: wp.array(dtype=real)):
            """The branch probes of `select_rows`' output: p_out[i] = p_a[src[i]] (which[i] == 0) or p_b[src[i]]."""
            i = wp.tid()
            if which[i] == 0:
                p_out[i] = p_a[src[i]]
            else:
                p_out[i] = p_b[src[i]]
        return select_probe

    @cached_property
    def _entry_adjoint(self):
        real = self.T.real

        @self.func
        def _entry_adjoint(q_grad: wp.array2d(dtype=real), qd_grad: wp.array2d(dtype=real), i: int, j: int):
            """Column j of row i of (q_grad | qd_grad), as float64."""
            if j < q_grad.shape[1]:
                return wp.float64(q_grad[i, j])
            return wp.float64(qd_grad[i, j - q_grad.shape[1]])
        return _entry_adjoint

    @cached_property
    def _entry_norm_sq(self):
        real = self.T.real
        _entry_adjoint = self._entry_adjoint

        @self.func
        def _entry_norm_sq(q_grad: wp.array2d(dtype=real), qd_grad: wp.array2d(dtype=real), i: int):
            """|row i of (q_grad | qd_grad)|^2, as float64."""
            total = wp.float64(0.0)
            for j in range(q_grad.shape[1] + qd_grad.shape[1]):
                v = _entry_adjoint(q_grad, qd_grad, i, j)
                total += v * v
            return total
        return _entry_norm_sq

    @cached_property
    def branch_gradient_spread(self):
        real = self.T.real
        _entry_adjoint, _entry_norm_sq = self._entry_adjoint, self._entry_norm_sq

        @self.kernel(enable_backward=False)
        def branch_gradient_spread(q_grad: wp.array2d(dtype=real), qd_grad: wp.array2d(dtype=real), first: int,
                                   branches: int, spread: wp.array(dtype=wp.float64)):
            """Bundle w of the B = `branches` rows first + w B ..: g_i = B x (adjoint of branch i's entry state,
            q and qd together), the branch's own gradient sample (the bundle's gradient is their mean m).
            Adds sum_i |g_i - m|^2 / (B (B - 1)) (the squared standard error of m) to spread[0], |m|^2 to
            spread[1], 1 to spread[2] and max_i |g_i|^2 / sum_i |g_i|^2 (the largest branch's share) to
            spread[3], for bundles whose m is not zero (B >= 2)."""
            w = wp.tid()
            b0 = first + w * branches
            scale = wp.float64(branches)
            mean_sq = wp.float64(0.0)
            dev_sq = wp.float64(0.0)
            largest = wp.float64(0.0)
            total = wp.float64(0.0)
            for b in range(branches):
                n = _entry_norm_sq(q_grad, qd_grad, b0 + b)
                largest = wp.max(largest, n)
                total += n
            for j in range(q_grad.shape[1] + qd_grad.shape[1]):
                m = wp.float64(0.0)
                for b in range(branches):
                    m += _entry_adjoint(q_grad, qd_grad, b0 + b, j) * scale
                m = m / scale
                mean_sq += m * m
                for b in range(branches):
                    d = _entry_adjoint(q_grad, qd_grad, b0 + b, j) * scale - m
                    dev_sq += d * d
            if mean_sq > wp.float64(0.0):
                wp.atomic_add(spread, 0, dev_sq / (scale * (scale - wp.float64(1.0))))
                wp.atomic_add(spread, 1, mean_sq)
                wp.atomic_add(spread, 2, wp.float64(1.0))
                wp.atomic_add(spread, 3, largest / total)
        return branch_gradient_spread

    @cached_property
    def clip_branch_adjoints(self):
        real = self.T.real
        _entry_norm_sq = self._entry_norm_sq

        @self.kernel(enable_backward=False)
        def clip_branch_adjoints(q_grad: wp.array2d(dtype=real), qd_grad: wp.array2d(dtype=real), first: int,
                                 branches: int, clip: real):
            """Bundle w of the B = `branches` rows first + w B ..: each row of (q_grad | qd_grad) longer than
            `clip` times the median row length of its bundle (the lower median for even B) is scaled down to
            that length, in place."""
            w = wp.tid()
            b0 = first + w * branches
            median_sq = wp.float64(0.0)
            for i in range(branches):
                n_i = _entry_norm_sq(q_grad, qd_grad, b0 + i)
                rank = int(0)
                for k in range(branches):
                    n_k = _entry_norm_sq(q_grad, qd_grad, b0 + k)
                    if n_k < n_i or (n_k == n_i and k < i):
                        rank += 1
                if rank == (branches - 1) // 2:
                    median_sq = n_i
            limit = wp.float64(clip) * wp.sqrt(median_sq)
            for i in range(branches):
                norm = wp.sqrt(_entry_norm_sq(q_grad, qd_grad, b0 + i))
                if norm > limit:
                    scale = real(limit / norm)
                    for j in range(q_grad.shape[1]):
                        q_grad[b0 + i, j] = q_grad[b0 + i, j] * scale
                    for j in range(qd_grad.shape[1]):
                        qd_grad[b0 + i, j] = qd_grad[b0 + i, j] * scale
        return clip_branch_adjoints

    @cached_property
    def nominal_offset(self):
        real, vec3 = self.T.real, self.T.vec3

        @self.kernel(enable_backward=False)
        def nominal_offset(slot: wp.array(dtype=int), q_nom: wp.array2d(dtype=real), qd_nom: wp.array2d(dtype=real),
                           imp_nom: wp.array2d(dtype=vec3), h_nom: wp.array2d(dtype=real),
                           q_mean: wp.array2d(dtype=real), qd_mean: wp.array2d(dtype=real),
                           imp_mean: wp.array2d(dtype=vec3), h_mean: wp.array2d(dtype=real),
                           q_off: wp.array2d(dtype=real), qd_off: wp.array2d(dtype=real),
                           imp_off: wp.array2d(dtype=vec3), h_off: wp.array2d(dtype=real)):
            """Nominal-forward ablation: constant offsets nominal - mean for environments in a window."""
            e, j = wp.tid()
            w = slot[e]
            if w < 0:
                return
            if j < q_nom.shape[1]:
                q_off[e, j] = q_nom[e, j] - q_mean[w, j]
            if j < qd_nom.shape[1]:
                qd_off[e, j] = qd_nom[e, j] - qd_mean[w, j]
            if j < h_nom.shape[1]:
                imp_off[e, j] = imp_nom[e, j] - imp_mean[w, j]
                h_off[e, j] = h_nom[e, j] - h_mean[w, j]
        return nominal_offset

    @cached_property
    def _response_adjoint(self):
        real = self.T.real
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.func
        def _response_adjoint(mdl: DeviceModel, response: wp.array3d(dtype=real), q_grad: wp.array2d(dtype=real),
                              qd_grad: wp.array2d(dtype=real), i: int, leg: int, kind: int, k: int):
            """sum over the leg's hinge dofs d of response[i, d, k] x the adjoint of d's coordinate in row i (its
            position, q index d + 1, for kind 0; its velocity for kind 1), as float64."""
            total = wp.float64(0.0)
            for t in range(mdl.leg_dof_start[leg], mdl.leg_dof_start[leg + 1]):
                d = mdl.leg_dof[t]
                a = qd_grad[i, d]
                if kind == 0:
                    a = q_grad[i, d + 1]
                total += wp.float64(response[i, d, k]) * wp.float64(a)
            return total
        return _response_adjoint

    @cached_property
    def _order_samples(self):
        real = self.T.real
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        _response_adjoint = self._response_adjoint

        @self.func
        def _order_samples(mdl: DeviceModel, probe_grad: wp.array(dtype=real), noise: wp.array2d(dtype=real),
                           response: wp.array3d(dtype=real), q_grad: wp.array2d(dtype=real),
                           qd_grad: wp.array2d(dtype=real), w: int, b0: int, b: int, nb: wp.float64,
                           c_mean: wp.float64, s: wp.float64, block: int, k: int):
            """(g0_b, g1_b) of `alpha_order_mix` for component k of `block` (2 leg + kind)."""
            c = nb * wp.float64(probe_grad[w * int(nb) + b])
            g0 = nb / (nb - wp.float64(1.0)) * (c - c_mean) * wp.float64(noise[b0 + b, 3 * block + k])
            leg = block // 2
            g1 = nb * s * _response_adjoint(mdl, response, q_grad, qd_grad, b0 + b, leg, block - 2 * leg, k)
            return g0, g1
        return _order_samples

    @cached_property
    def alpha_order_mix(self):
        real, vec3, mat33 = self.T.real, self.T.vec3, self.T.mat33
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        _order_samples = self._order_samples

        @self.kernel(enable_backward=False)
        def alpha_order_mix(mdl: DeviceModel, q_grad: wp.array2d(dtype=real), qd_grad: wp.array2d(dtype=real),
                            probe_grad: wp.array(dtype=real), noise: wp.array2d(dtype=real),
                            response: wp.array3d(dtype=real), scales: wp.array2d(dtype=real), first: int, branches: int,
                            alpha: wp.float64, sums: wp.array(dtype=wp.float64)):
            """Bundle w of the B = `branches` rows first + w B .. of the new bundles' entry states (their
            adjoints q_grad, qd_grad complete; noise, response and scales as `foot_perturbation` kept them for
            those rows; probe_grad[w B + b]: branch b's share of the loss, see `branch_mean`): Suh et al.'s
            alpha-order gradient along the perturbation's directions, in place, with the weight `alpha`.

            Per perturbed block (leg, position or velocity; std s, unit response R of the bundle's source
            row, n x 3) the noise z ~ N(0, I_3) moved the entry state by w = s R z (before the clamp), so
            - first-order, branch b: g1_b = B s R^T a_b (a_b its entry adjoint: the bundle's gradient is
              sum_b a_b, whose projection s R^T sum_b a_b is mean_b g1_b);
            - zero-order: g0_b = B / (B - 1) (c_b - mean c) z_b, c_b = B probe_grad[b] (branch b's own loss,
              linearised at the bundle's means);
            - the projection is moved to alpha mean g1 + (1 - alpha) mean g0 by adding R (R^T R)^-1 delta / (s B)
              to every branch's adjoint (delta the change of each block's 3 components): the gradient
              orthogonal to the noise stays first-order.
            sums[6] and sums[7] add the sample variances of the two means (summed over the blocks' components),
            from which the bundler takes the next alpha = v0 / (v0 + v1)."""
            w = wp.tid()
            b0 = first + w * branches
            nb = wp.float64(branches)
            c_mean = wp.float64(0.0)
            for b in range(branches):
                c_mean += wp.float64(probe_grad[w * branches + b])      # mean of c_b = B probe_grad[b]
            mean0 = blocks43()
            mean1 = blocks43()
            v0 = wp.float64(0.0)
            v1 = wp.float64(0.0)
            for block in range(4):
                s = wp.float64(scales[b0, block])
                if s > wp.float64(0.0):
                    for k in range(3):
                        m0 = wp.float64(0.0)
                        m1 = wp.float64(0.0)
                        sq0 = wp.float64(0.0)
                        sq1 = wp.float64(0.0)
                        for b in range(branches):
                            g0, g1 = _order_samples(mdl, probe_grad, noise, response, q_grad, qd_grad, w, b0, b, nb,
                                                    c_mean, s, block, k)
                            m0 += g0 / nb
                            m1 += g1 / nb
                            sq0 += g0 * g0
                            sq1 += g1 * g1
                        mean0[block, k] = m0
                        mean1[block, k] = m1
                        v0 += (sq0 - nb * m0 * m0) / (nb * (nb - wp.float64(1.0)))
                        v1 += (sq1 - nb * m1 * m1) / (nb * (nb - wp.float64(1.0)))
            wp.atomic_add(sums, 6, v0)
            wp.atomic_add(sums, 7, v1)
            if alpha >= wp.float64(1.0):
                return
            for block in range(4):
                s = wp.float64(scales[b0, block])
                if s > wp.float64(0.0):
                    leg = block // 2
                    delta = vec3()
                    rtr = mat33()
                    for k in range(3):
                        delta[k] = real((wp.float64(1.0) - alpha) * (mean0[block, k] - mean1[block, k]))
                    for t in range(mdl.leg_dof_start[leg], mdl.leg_dof_start[leg + 1]):
                        d = mdl.leg_dof[t]
                        row = vec3(response[b0, d, 0], response[b0, d, 1], response[b0, d, 2])
                        rtr += wp.outer(row, row)
                    x = wp.inverse(rtr) * delta
                    for t in range(mdl.leg_dof_start[leg], mdl.leg_dof_start[leg + 1]):
                        d = mdl.leg_dof[t]
                        row = vec3(response[b0, d, 0], response[b0, d, 1], response[b0, d, 2])
                        add = wp.dot(row, x) / real(s * nb)
                        for b in range(branches):
                            if block - 2 * leg == 0:
                                q_grad[b0 + b, d + 1] = q_grad[b0 + b, d + 1] + add
                            else:
                                qd_grad[b0 + b, d] = qd_grad[b0 + b, d] + add
        return alpha_order_mix
