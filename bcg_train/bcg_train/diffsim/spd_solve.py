"""Batched sparse solve with the joint-space mass matrix, with an exact hand-written adjoint.

A = L^T D L with L unit lower triangular (MuJoCo's factorisation order, leaves first): with dofs
ordered parents before children, L has exactly the sparsity of A (no fill-in), so the factor and
each solve walk only ancestor chains. The forward kernel runs without autodiff; `solve` records
the adjoint on the tape: for X = A^-1 B (A including the extra diagonal), adj_B += A^-1 adj_X and, on A's lower triangle,
adj_A[i, j] -= adj_B_i . X_j + adj_B_j . X_i (i > j), adj_A[i, i] -= adj_B_i . X_i.
"""
import warp as wp

f64 = wp.float64


@wp.func
def _solve_column(ld: wp.array3d(dtype=f64), dof_parent: wp.array(dtype=int), nv: int,
                  b: wp.array3d(dtype=f64), x: wp.array3d(dtype=f64), e: int, c: int):
    for i in range(nv):
        x[e, i, c] = b[e, i, c]
    # x <- L^-T x
    for kk in range(nv):
        k = nv - 1 - kk
        i = dof_parent[k]
        while i >= 0:
            x[e, i, c] = x[e, i, c] - ld[e, k, i] * x[e, k, c]
            i = dof_parent[i]
    # x <- D^-1 x
    for i in range(nv):
        x[e, i, c] = x[e, i, c] / ld[e, i, i]
    # x <- L^-1 x
    for k in range(nv):
        i = dof_parent[k]
        while i >= 0:
            x[e, k, c] = x[e, k, c] - ld[e, k, i] * x[e, i, c]
            i = dof_parent[i]


@wp.kernel(enable_backward=False)
def factor(a: wp.array3d(dtype=f64), diag: wp.array2d(dtype=f64), dof_parent: wp.array(dtype=int), nv: int,
           ld: wp.array3d(dtype=f64)):
    """ld <- L and D of A + diag(diag) (A's lower triangle read; D on the diagonal, L below it)."""
    e = wp.tid()
    for i in range(nv):
        ld[e, i, i] = a[e, i, i] + diag[e, i]
        j = dof_parent[i]
        while j >= 0:
            ld[e, i, j] = a[e, i, j]
            j = dof_parent[j]
    for kk in range(nv):
        k = nv - 1 - kk
        i = dof_parent[k]
        while i >= 0:
            t = ld[e, k, i] / ld[e, k, k]
            j = i
            while j >= 0:
                ld[e, i, j] = ld[e, i, j] - t * ld[e, k, j]
                j = dof_parent[j]
            ld[e, k, i] = t
            i = dof_parent[i]


@wp.kernel(enable_backward=False)
def solve_columns(ld: wp.array3d(dtype=f64), dof_parent: wp.array(dtype=int), nv: int,
                  b: wp.array3d(dtype=f64), x: wp.array3d(dtype=f64)):
    e, c = wp.tid()
    _solve_column(ld, dof_parent, nv, b, x, e, c)


@wp.kernel(enable_backward=False)
def accumulate_adjoint(pair_i: wp.array(dtype=int), pair_j: wp.array(dtype=int), ncol: int,
                       adj_b: wp.array3d(dtype=f64), x: wp.array3d(dtype=f64),
                       adj_a: wp.array3d(dtype=f64), adj_diag: wp.array2d(dtype=f64),
                       adj_b_total: wp.array3d(dtype=f64)):
    """Per (env, lower-triangle entry): adj_A -= adj_B x^T + x adj_B^T; per diagonal entry also
    adds adj_B into the caller's B gradient (once per row)."""
    e, k = wp.tid()
    i = pair_i[k]
    j = pair_j[k]
    s = f64(0.0)
    for c in range(ncol):
        if i == j:
            s += adj_b[e, i, c] * x[e, i, c]
        else:
            s += adj_b[e, i, c] * x[e, j, c] + adj_b[e, j, c] * x[e, i, c]
    adj_a[e, i, j] = adj_a[e, i, j] - s
    if i == j:
        adj_diag[e, i] = adj_diag[e, i] - s
        for c in range(ncol):
            adj_b_total[e, i, c] = adj_b_total[e, i, c] + adj_b[e, i, c]


def solve(model, a: wp.array, diag: wp.array, b: wp.array, x: wp.array, ld: wp.array, tape=None) -> None:
    """X = (A + diag(diag))^-1 B for (N, nv, nv) A (lower triangle used), (N, nv) diag and
    (N, nv, ncol) B; `ld` is scratch of A's shape that keeps the factor for the adjoint. Records the
    adjoint on `tape` when given."""
    n, nv, ncol = b.shape
    wp.launch(factor, dim=n, inputs=[a, diag, model.dof_parent, nv, ld], device=model.device, record_tape=False)
    wp.launch(solve_columns, dim=(n, ncol), inputs=[ld, model.dof_parent, nv, b, x], device=model.device,
              record_tape=False)
    if tape is None or x.grad is None:
        return

    def backward():
        adj_b = wp.empty_like(b, requires_grad=False)
        wp.launch(solve_columns, dim=(n, ncol), inputs=[ld, model.dof_parent, nv, x.grad, adj_b], device=model.device)
        wp.launch(accumulate_adjoint, dim=(n, model.npair),
                  inputs=[model.pair_i, model.pair_j, ncol, adj_b, x, a.grad, diag.grad, b.grad], device=model.device)

    tape.record_func(backward=backward, arrays=[a, diag, b, x])
