"""Warp kernels that close a substep: PD torques, the velocity update and the position update."""
import warp as wp

f64 = wp.float64
vec3 = wp.vec3d


@wp.kernel
def pd_torque(
    q: wp.array2d(dtype=f64), qd: wp.array2d(dtype=f64), joint_dof: wp.array(dtype=int),
    tau_limit: wp.array(dtype=f64), q_target: wp.array2d(dtype=f64), qd_target: wp.array2d(dtype=f64),
    kp: wp.array2d(dtype=f64), kd: wp.array2d(dtype=f64), tau_ff: wp.array2d(dtype=f64), h: f64,
    tau: wp.array2d(dtype=f64), pd_diag: wp.array2d(dtype=f64),
):
    """tau = clamp(tau_ff + kp (q* - q) + kd (qd* - qd), +-limit) [N m], as the motor drivers do.

    The drivers close this loop far faster than the substep, so it is integrated implicitly in
    qd+ = qd + h qdd: where the torque is not saturated, h kd + h^2 kp joins the diagonal of the
    solve (pd_diag) and tau carries the matching -(kd + h kp) h qdd terms through it."""
    e, j = wp.tid()
    d = joint_dof[j]
    u = tau_ff[e, j] + kp[e, j] * (q_target[e, j] - q[e, d + 1]) + kd[e, j] * (qd_target[e, j] - qd[e, d])
    lim = tau_limit[j]
    if u > lim or u < -lim:
        tau[e, d] = wp.clamp(u, -lim, lim)
    else:
        tau[e, d] = u - h * kp[e, j] * qd[e, d]
        pd_diag[e, d] = h * kd[e, j] + h * h * kp[e, j]


@wp.kernel
def velocity_update(
    nc: int, h: f64, qd: wp.array2d(dtype=f64), x: wp.array3d(dtype=f64), impulse: wp.array3d(dtype=f64),
    qd_out: wp.array2d(dtype=f64),
):
    """qd+ = qd + h A^-1 f + A^-1 J^T (s p)."""
    e, d = wp.tid()
    wp.atomic_add(qd_out, e, d, qd[e, d] + h * x[e, d, 0])
    for k in range(nc):
        for a in range(3):
            wp.atomic_add(qd_out, e, d, x[e, d, 1 + 3 * k + a] * impulse[e, k, a])


@wp.kernel
def position_update(nv: int, h: f64, q: wp.array2d(dtype=f64), qd_out: wp.array2d(dtype=f64),
                    q_out: wp.array2d(dtype=f64)):
    """Semi-implicit Euler: joints q += h qd+; base position += h v; base orientation
    r <- normalize(r exp(h w_body / 2)), w_body the body-frame angular velocity (MuJoCo's convention)."""
    e = wp.tid()
    for i in range(3):
        q_out[e, i] = q[e, i] + h * qd_out[e, i]
    half = vec3(qd_out[e, 3], qd_out[e, 4], qd_out[e, 5]) * (f64(0.5) * h)
    t2 = wp.dot(half, half)
    sinc = f64(1.0) - t2 / f64(6.0)
    cos = f64(1.0) - t2 / f64(2.0)
    if t2 > f64(1.0e-12):
        t = wp.sqrt(t2)
        sinc = wp.sin(t) / t
        cos = wp.cos(t)
    dq = wp.quatd(half[0] * sinc, half[1] * sinc, half[2] * sinc, cos)
    r = wp.normalize(wp.mul(wp.quatd(q[e, 4], q[e, 5], q[e, 6], q[e, 3]), dq))
    q_out[e, 3] = r[3]
    q_out[e, 4] = r[0]
    q_out[e, 5] = r[1]
    q_out[e, 6] = r[2]
    for d in range(6, nv):
        q_out[e, d + 1] = q[e, d + 1] + h * qd_out[e, d]


@wp.kernel(enable_backward=False)
def nonfinite_flags(q: wp.array2d(dtype=f64), qd: wp.array2d(dtype=f64), nq: int, nv: int,
                    flags: wp.array(dtype=int)):
    """flags[e] = 1 where any coordinate or velocity of environment e is NaN or infinite."""
    e = wp.tid()
    bad = int(0)
    for i in range(nq):
        if not wp.isfinite(q[e, i]):
            bad = 1
    for i in range(nv):
        if not wp.isfinite(qd[e, i]):
            bad = 1
    flags[e] = bad
