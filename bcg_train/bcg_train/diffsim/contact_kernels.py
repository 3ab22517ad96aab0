"""Warp kernels of the smoothed impulse contact (METHOD.md, "Contact model").

Each foot sphere against the plane z = 0: signed height c of its lowest point, smoothing
s_k(c) = 1 / (1 + exp(k c)), contact Jacobian rows (normal z, tangents x, y), Delassus operator
G = J A^-1 J^T, and projected iterations p <- proj(p - r (G (s p) + v_free)) onto normal >= 0 and
the Coulomb cone with the diagonal step r = 1 / G_rr, p = 0 at the start of every substep. The
applied impulse is s p. The iterations run sphere by sphere (Gauss-Seidel order): measured on the
G1 standing, the simultaneous (Jacobi) form either diverges with the diagonal step (the four
spheres of a foot are strongly coupled) or, with a step bounded by the row sum, leaves the heavy
whole-robot mode unconverged after 10 iterations so the feet sink steadily (12 mm/s at k = 300).
Write-once / accumulate-before-read discipline as in dynamics_kernels.
"""
import warp as wp

f64 = wp.float64
vec3 = wp.vec3d


@wp.func
def sphere_center(xrot: wp.array2d(dtype=wp.quatd), xpos: wp.array2d(dtype=vec3), e: int, b: int, local: vec3):
    return xpos[e, b] + wp.quat_rotate(xrot[e, b], local)


@wp.kernel
def contact_geometry(
    xrot: wp.array2d(dtype=wp.quatd), xpos: wp.array2d(dtype=vec3),
    sphere_body: wp.array(dtype=int), sphere_pos: wp.array(dtype=vec3), sphere_radius: wp.array(dtype=f64),
    kappa: f64, height: wp.array2d(dtype=f64), smooth: wp.array2d(dtype=f64),
):
    """height [m] of each sphere's lowest point above the ground and its smoothing factor s_k [-]."""
    e, k = wp.tid()
    c = sphere_center(xrot, xpos, e, sphere_body[k], sphere_pos[k])[2] - sphere_radius[k]
    height[e, k] = c
    smooth[e, k] = f64(1.0) / (f64(1.0) + wp.exp(kappa * c))


@wp.kernel
def contact_jacobian(
    q: wp.array2d(dtype=f64), xrot: wp.array2d(dtype=wp.quatd), xpos: wp.array2d(dtype=vec3),
    s_ang: wp.array2d(dtype=vec3), s_lin: wp.array2d(dtype=vec3),
    sphere_body: wp.array(dtype=int), sphere_pos: wp.array(dtype=vec3), sphere_radius: wp.array(dtype=f64),
    cd_contact: wp.array(dtype=int), cd_dof: wp.array(dtype=int), rhs: wp.array3d(dtype=f64),
):
    """J^T into rhs[:, d, 1 + 3k + (0 normal z, 1 x, 2 y)] for every ancestor dof d of sphere k."""
    e, t = wp.tid()
    k = cd_contact[t]
    d = cd_dof[t]
    o = vec3(q[e, 0], q[e, 1], q[e, 2])
    x = sphere_center(xrot, xpos, e, sphere_body[k], sphere_pos[k]) - vec3(f64(0.0), f64(0.0), sphere_radius[k])
    col = s_lin[e, d] + wp.cross(s_ang[e, d], x - o)
    rhs[e, d, 1 + 3 * k] = col[2]
    rhs[e, d, 2 + 3 * k] = col[0]
    rhs[e, d, 3 + 3 * k] = col[1]


@wp.kernel
def delassus(
    nr: int, h: f64, cd_start: wp.array(dtype=int), cd_dof: wp.array(dtype=int),
    qd: wp.array2d(dtype=f64), rhs: wp.array3d(dtype=f64), x: wp.array3d(dtype=f64),
    g: wp.array3d(dtype=f64), v_free: wp.array2d(dtype=f64),
):
    """G[r, c] = J_r A^-1 J_c^T and, in column nr, the contact velocity J_r (qd + h qdd_free).

    J_r is non-zero only on the ancestor dofs of row r's sphere (entries cd_start[k]..cd_start[k+1]
    of the contact-dof table), so only those are summed."""
    e, r, c = wp.tid()
    k = r / 3
    for t in range(cd_start[k], cd_start[k + 1]):
        d = cd_dof[t]
        if c < nr:
            wp.atomic_add(g, e, r, c, rhs[e, d, 1 + r] * x[e, d, 1 + c])
        else:
            wp.atomic_add(v_free, e, r, rhs[e, d, 1 + r] * (qd[e, d] + h * x[e, d, 0]))


@wp.kernel
def projected_gauss_seidel(
    nc: int, iterations: int, g: wp.array3d(dtype=f64), v_free: wp.array2d(dtype=f64),
    smooth: wp.array2d(dtype=f64), friction: wp.array(dtype=f64),
    residual: wp.array3d(dtype=f64), p: wp.array3d(dtype=f64),
):
    """p[:, it + 1] from p[:, it] (p[:, 0] = 0), sphere by sphere: residual of its three rows
    G (s p) + v_free with the spheres before it already updated, a step 1 / G_rr per row, then the
    projection onto normal >= 0 and the Coulomb cone."""
    e = wp.tid()
    nr = 3 * nc
    for it in range(iterations):
        for k in range(nc):
            for a in range(3):
                r = 3 * k + a
                wp.atomic_add(residual, e, it, r, v_free[e, r])
                for c in range(nr):
                    pc = p[e, it, c]
                    if c < 3 * k:
                        pc = p[e, it + 1, c]
                    wp.atomic_add(residual, e, it, r, g[e, r, c] * smooth[e, c / 3] * pc)
            n = 3 * k
            pn = p[e, it, n] - residual[e, it, n] / g[e, n, n]
            p1 = p[e, it, n + 1] - residual[e, it, n + 1] / g[e, n + 1, n + 1]
            p2 = p[e, it, n + 2] - residual[e, it, n + 2] / g[e, n + 2, n + 2]
            pn = wp.max(pn, f64(0.0))
            lim = friction[k] * pn
            tn2 = p1 * p1 + p2 * p2
            if tn2 > lim * lim:
                scale = lim / wp.sqrt(tn2)
                p1 = p1 * scale
                p2 = p2 * scale
            p[e, it + 1, n] = pn
            p[e, it + 1, n + 1] = p1
            p[e, it + 1, n + 2] = p2


@wp.kernel
def contact_impulse(nc: int, iterations: int, p: wp.array3d(dtype=f64), smooth: wp.array2d(dtype=f64),
                    impulse: wp.array3d(dtype=f64)):
    """Applied impulse s p [N s] per sphere: (normal, x, y)."""
    e, k = wp.tid()
    for a in range(3):
        impulse[e, k, a] = smooth[e, k] * p[e, iterations, 3 * k + a]
