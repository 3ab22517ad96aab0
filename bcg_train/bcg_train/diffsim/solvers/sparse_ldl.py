"""The joint-space inertia in MuJoCo's sparse L^T D L form, and the two operations built on it, with
exact hand-written adjoints recorded on the tape.

Storage: the lower triangle of A, row by row: row i holds (i, i), (i, parent(i)), (i, parent(parent(i))),
... so a row is dof i followed by its ancestors (`Model.dof_row_start`, `Model.pair_j`). With dofs
ordered parents first, L has exactly this sparsity (no fill-in), and the ancestors of any dof in a row
are the tail of that row, so factor and solves walk contiguous memory.

- `factor`: ld <- L (below the diagonal) and D (on it) of A + diag(extra).
- `solve`: x = A^-1 b = L^-1 D^-1 L^-T b for one vector per environment.
- `delassus`: G = J A^-1 J^T for the foot contact rows. J of a sphere is non-zero only on the
  ancestor chain of its body, and L^-T keeps that support, so Y = L^-T J^T lives on the chain and
  G = Y^T D^-1 Y sums only over the dofs two chains share.

Gradients: `solve` and `delassus` backpropagate into L and D (adj_ld, on the chains only for
`delassus`), and one reverse sweep of the factorisation (`factor_adjoint`) carries adj_ld into A.

Shapes: a, ld (N, npair); extra, b, x (N, nv); jt, y (N, ncd) vec3 with (normal z, x, y) components,
sphere k's entries t in [contact_dof_start[k], contact_dof_start[k + 1]) on dofs contact_dof_d[t],
leaf first; g (N, 3 nc, 3 nc).
"""
from functools import cached_property
from typing import Optional

import warp as wp

from ..kernels.device_model import DeviceModelStruct, model_types
from ..kernels.launch import LaunchSites
from ..precision import WarpDefinitions


class LDLKernels(WarpDefinitions):
    """The factor's kernels, in one precision (see diffsim.precision)."""

    @cached_property
    def factor(self):
        real = self.T.real
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel(enable_backward=False)
        def factor(mdl: DeviceModel, a: wp.array2d(dtype=real), extra: wp.array2d(dtype=real),
                   ld: wp.array2d(dtype=real)):
            """ld <- L^T D L factor of A + diag(extra), leaves first (MuJoCo's mj_factorM)."""
            e = wp.tid()
            nv = mdl.nv
            row_start = mdl.dof_row_start
            pair_j = mdl.pair_j
            for k in range(row_start[nv]):
                ld[e, k] = a[e, k]
            for i in range(nv):
                ld[e, row_start[i]] += extra[e, i]
            for kk in range(nv):
                k = nv - 1 - kk
                r = row_start[k]
                m = row_start[k + 1] - r
                for c in range(1, m):
                    ri = row_start[pair_j[r + c]]
                    t = ld[e, r + c] / ld[e, r]
                    for b in range(m - c):
                        ld[e, ri + b] -= t * ld[e, r + c + b]
                    ld[e, r + c] = t
        return factor

    @cached_property
    def solve_in_place(self):
        real = self.T.real
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.func
        def solve_in_place(mdl: DeviceModel, ld: wp.array2d(dtype=real), x: wp.array2d(dtype=real), e: int, row: int):
            """x[row] <- A^-1 x[row] with the factor of environment e (x: (rows, nv))."""
            nv = mdl.nv
            row_start = mdl.dof_row_start
            pair_j = mdl.pair_j
            for kk in range(nv):
                k = nv - 1 - kk
                r = row_start[k]
                xk = x[row, k]
                for c in range(1, row_start[k + 1] - r):
                    x[row, pair_j[r + c]] -= ld[e, r + c] * xk
            for i in range(nv):
                x[row, i] = x[row, i] / ld[e, row_start[i]]
            for k in range(nv):
                r = row_start[k]
                s = x[row, k]
                for c in range(1, row_start[k + 1] - r):
                    s -= ld[e, r + c] * x[row, pair_j[r + c]]
                x[row, k] = s
        return solve_in_place

    @cached_property
    def solve_vectors(self):
        real = self.T.real
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel
        solve_in_place = self.solve_in_place

        @self.kernel(enable_backward=False)
        def solve_vectors(mdl: DeviceModel, ld: wp.array2d(dtype=real), b: wp.array2d(dtype=real),
                          x: wp.array2d(dtype=real)):
            """x[e] = A_e^-1 b[e]."""
            e = wp.tid()
            for i in range(mdl.nv):
                x[e, i] = b[e, i]
            solve_in_place(mdl, ld, x, e, e)
        return solve_vectors

    @cached_property
    def chain_lt_solve(self):
        real, vec3 = self.T.real, self.T.vec3
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel(enable_backward=False)
        def chain_lt_solve(mdl: DeviceModel, ld: wp.array2d(dtype=real), jt: wp.array2d(dtype=vec3),
                           y: wp.array2d(dtype=vec3)):
            """Y = L^-T J^T on the ancestor chain of sphere k (the chain is row `contact_dof_d[start[k]]` of L)."""
            e, k = wp.tid()
            t0 = mdl.contact_dof_start[k]
            m = mdl.contact_dof_start[k + 1] - t0
            for u in range(m):
                y[e, t0 + u] = jt[e, t0 + u]
            for u in range(m):
                r = mdl.dof_row_start[mdl.contact_dof_d[t0 + u]]
                yu = y[e, t0 + u]
                for c in range(1, m - u):
                    y[e, t0 + u + c] = y[e, t0 + u + c] - ld[e, r + c] * yu
        return chain_lt_solve

    @cached_property
    def delassus_blocks(self):
        real, vec3, mat33 = self.T.real, self.T.vec3, self.T.mat33
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel(enable_backward=False)
        def delassus_blocks(mdl: DeviceModel, ld: wp.array2d(dtype=real), y: wp.array2d(dtype=vec3),
                            g: wp.array3d(dtype=real)):
            """3x3 blocks (k, other) and (other, k) = (k, other)^T of G, other <= k: sum over the common
            ancestor dofs d of y_k(d) y_other(d)^T / D_d."""
            e, k, other = wp.tid()
            if other > k:
                return
            tk = mdl.contact_dof_start[k + 1] - 1
            t_other = mdl.contact_dof_start[other + 1] - 1
            blk = mat33()
            for w in range(mdl.sphere_common[k, other]):
                blk += wp.outer(y[e, tk - w], y[e, t_other - w]) / ld[e, mdl.dof_row_start[mdl.contact_dof_d[tk - w]]]
            for a in range(3):
                for b in range(3):
                    g[e, 3 * k + a, 3 * other + b] = blk[a, b]
                    g[e, 3 * other + b, 3 * k + a] = blk[a, b]
        return delassus_blocks

    @cached_property
    def factor_adjoint(self):
        real = self.T.real
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel(enable_backward=False)
        def factor_adjoint(mdl: DeviceModel, ld: wp.array2d(dtype=real), adj_ld: wp.array2d(dtype=real),
                           adj_a: wp.array2d(dtype=real), adj_extra: wp.array2d(dtype=real)):
            """Reverse sweep of `factor`: adj_ld (adjoints of the final L below and D on the diagonal, consumed)
            -> adj_A and adj_extra. Every value the forward sweep read is recovered from the final factor: when
            row k is processed its diagonal D_k and entries are final, and entry c read before its division is
            L[k, c] D_k."""
            e = wp.tid()
            rs = mdl.dof_row_start
            for k in range(mdl.nv):
                r = rs[k]
                m = rs[k + 1] - r
                dk = ld[e, r]
                for cc in range(m - 1):
                    c = m - 1 - cc
                    ri = rs[mdl.pair_j[r + c]]
                    t = ld[e, r + c]
                    adj_t = adj_ld[e, r + c]
                    adj_v = real(0.0)
                    for b in range(m - c):
                        adj_x = adj_ld[e, ri + b]
                        adj_t -= adj_x * ld[e, r + c + b] * dk
                        if b == 0:
                            adj_v -= adj_x * t
                        else:
                            adj_ld[e, r + c + b] -= adj_x * t
                    # t = v / D_k
                    adj_ld[e, r + c] = adj_v + adj_t / dk
                    adj_ld[e, r] -= adj_t * t / dk
            for k in range(rs[mdl.nv]):
                adj_a[e, k] += adj_ld[e, k]
            for i in range(mdl.nv):
                adj_extra[e, i] += adj_ld[e, rs[i]]
        return factor_adjoint

    @cached_property
    def solve_adjoint(self):
        real = self.T.real
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel(enable_backward=False)
        def solve_adjoint(mdl: DeviceModel, ld: wp.array2d(dtype=real), x: wp.array2d(dtype=real),
                          adj_x: wp.array2d(dtype=real), g: wp.array2d(dtype=real), w: wp.array2d(dtype=real),
                          adj_b: wp.array2d(dtype=real), adj_ld: wp.array2d(dtype=real)):
            """Adjoint of x = L^-1 D^-1 L^-T b into b and the factor. With w2 = L x, w1 = D w2 (the forward's
            intermediates) and g = L^-T adj_x: adj_L[k, i] -= g_k x_i, adj_D_k -= g_k w2_k / D_k,
            adj_b = L^-1 D^-1 g, adj_L[k, i] -= w1_k adj_b_i. Two passes: leaves to root (g is final at k once
            k's descendants are done), then root to leaves (adj_b is final at k's ancestors)."""
            e = wp.tid()
            nv = mdl.nv
            rs = mdl.dof_row_start
            pj = mdl.pair_j
            for i in range(nv):
                g[e, i] = adj_x[e, i]
            for kk in range(nv):
                k = nv - 1 - kk
                r = rs[k]
                gk = g[e, k]
                w2 = x[e, k]
                for c in range(1, rs[k + 1] - r):
                    i = pj[r + c]
                    w2 += ld[e, r + c] * x[e, i]
                    adj_ld[e, r + c] -= gk * x[e, i]
                    g[e, i] -= ld[e, r + c] * gk
                adj_ld[e, r] -= gk * w2 / ld[e, r]
                w[e, k] = w2 * ld[e, r]
            for k in range(nv):
                r = rs[k]
                ab = g[e, k] / ld[e, r]
                for c in range(1, rs[k + 1] - r):
                    i = pj[r + c]
                    ab -= ld[e, r + c] * g[e, i]
                    adj_ld[e, r + c] -= w[e, k] * g[e, i]
                g[e, k] = ab
                adj_b[e, k] += ab
        return solve_adjoint

    @cached_property
    def delassus_adjoint(self):
        real, vec3, mat33 = self.T.real, self.T.vec3, self.T.mat33
        DeviceModel = DeviceModelStruct.of(self.T).DeviceModel

        @self.kernel(enable_backward=False)
        def delassus_adjoint(mdl: DeviceModel, ld: wp.array2d(dtype=real), y: wp.array2d(dtype=vec3),
                             adj_g: wp.array3d(dtype=real), adj_y: wp.array2d(dtype=vec3),
                             adj_jt: wp.array2d(dtype=vec3), adj_ld: wp.array2d(dtype=real)):
            """Adjoint of G = Y^T D^-1 Y, Y = L^-T J^T for sphere k's three columns, all on k's chain:
            adj_Y = D^-1 Y (adj_G + adj_G^T), adj_D_d -= Y_d . adj_Y_d / (2 D_d), Z = L^-1 adj_Y,
            adj_J^T += Z, adj_L[a, b] -= Y_a . Z_b."""
            e, k = wp.tid()
            rs = mdl.dof_row_start
            t0 = mdl.contact_dof_start[k]
            m = mdl.contact_dof_start[k + 1] - t0
            for u in range(m):
                adj_y[e, t0 + u] = vec3()
            for other in range(mdl.nc):
                blk = mat33()
                for a in range(3):
                    for b in range(3):
                        blk[a, b] = adj_g[e, 3 * other + b, 3 * k + a] + adj_g[e, 3 * k + a, 3 * other + b]
                t_other = mdl.contact_dof_start[other + 1] - 1
                for w in range(mdl.sphere_common[k, other]):
                    adj_y[e, t0 + m - 1 - w] = adj_y[e, t0 + m - 1 - w] + blk * y[e, t_other - w]
            for u in range(m):
                d = rs[mdl.contact_dof_d[t0 + u]]
                adj_y[e, t0 + u] = adj_y[e, t0 + u] / ld[e, d]
                wp.atomic_add(adj_ld, e, d, -real(0.5) * wp.dot(y[e, t0 + u], adj_y[e, t0 + u]) / ld[e, d])
            # Z = L^-1 adj_Y, root end first (in place)
            for uu in range(m):
                u = m - 1 - uu
                r = rs[mdl.contact_dof_d[t0 + u]]
                z = adj_y[e, t0 + u]
                for c in range(1, m - u):
                    z -= ld[e, r + c] * adj_y[e, t0 + u + c]
                adj_y[e, t0 + u] = z
                adj_jt[e, t0 + u] = adj_jt[e, t0 + u] + z
            for u in range(m):
                r = rs[mdl.contact_dof_d[t0 + u]]
                for c in range(1, m - u):
                    wp.atomic_add(adj_ld, e, r + c, -wp.dot(y[e, t0 + u], adj_y[e, t0 + u + c]))
        return delassus_adjoint


class SparseLDL:
    """Factor of A + diag(extra) for up to `capacity` environments (the first `rows` of them are
    factored and solved), and the solve and Delassus operations on it.
    Its kernels read only the model's structure (sparsity, contact chains), which a `PhysicsVariation`
    never changes, so one instance serves every variation of the kernel model it was built with.

    `factor` runs first; with a tape (None: no gradient), each operation's backward accumulates into the adjoint of the
    factor (adj_ld), and the factor's own backward, recorded first and so run last, turns it into
    adj_A and adj_extra. Launches go through `launches` (one owner's sites: see kernels.launch)."""

    def __init__(self, mdl, device: str, capacity: int, npair: int, requires_grad: bool = False):
        types = model_types(mdl)
        self.mdl, self.nc, self.device = mdl, mdl.nc, device
        self.kernels = LDLKernels.of(types)
        """The kernels in the precision of `mdl` (a DeviceModel)."""
        self.rows = capacity
        self.ld = wp.zeros((capacity, npair), dtype=types.real, device=device)
        self.adj_ld = wp.zeros_like(self.ld) if requires_grad else None
        self.launches = LaunchSites(device)
        self._temps = {}

    def factor(self, a: wp.array, extra: wp.array, tape: Optional[wp.Tape]) -> None:
        rows = self.rows
        self._launch(self.kernels.factor, rows, [a, extra, self.ld])
        if tape is None or self.adj_ld is None:
            return
        site = self.launches.site(self.kernels.factor_adjoint)

        def backward():
            site(rows, [self.mdl, self.ld, self.adj_ld, a.grad, extra.grad])
            self.adj_ld.zero_()   # consumed: a second backward pass starts from zero again

        tape.record_func(backward=backward, arrays=[a, extra])

    def solve(self, b: wp.array, x: wp.array, tape: Optional[wp.Tape]) -> None:
        """x (rows, nv) = A^-1 b (rows, nv)."""
        rows = self.rows
        self._launch(self.kernels.solve_vectors, rows, [self.ld, b, x])
        if tape is None or x.grad is None:
            return
        site = self.launches.site(self.kernels.solve_adjoint)

        def backward():
            site(rows, [self.mdl, self.ld, x, x.grad, self._temp("g", x), self._temp("w", x), b.grad, self.adj_ld])

        tape.record_func(backward=backward, arrays=[b, x])

    def delassus(self, jt: wp.array, y: wp.array, g: wp.array, tape: Optional[wp.Tape]) -> None:
        """g (rows, 3 nc, 3 nc) = J A^-1 J^T from jt (rows, ncd) vec3; y (jt's shape) keeps Y = L^-T J^T."""
        rows, nc = self.rows, self.nc
        self._launch(self.kernels.chain_lt_solve, (rows, nc), [self.ld, jt, y])
        self._launch(self.kernels.delassus_blocks, (rows, nc, nc), [self.ld, y, g])
        if tape is None or g.grad is None:
            return
        site = self.launches.site(self.kernels.delassus_adjoint)

        def backward():
            site((rows, nc), [self.mdl, self.ld, y, g.grad, self._temp("adj_y", y), jt.grad, self.adj_ld])

        tape.record_func(backward=backward, arrays=[jt, g])

    def _launch(self, kernel, dim, args) -> None:
        self.launches(kernel, dim, [self.mdl, *args])

    def _temp(self, name: str, like: wp.array) -> wp.array:
        """Backward work array `name`, shaped as `like`, kept between backward passes (contents undefined)."""
        t = self._temps.get(name)
        if t is None or t.shape != like.shape:
            t = self._temps[name] = wp.empty(like.shape, dtype=like.dtype, device=self.device)
        return t
