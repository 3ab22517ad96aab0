"""`DeviceModel`: a Model's arrays plus one simulator's solver constants as one Warp struct, so each
kernel launch packs a single argument for the whole robot instead of a dozen arrays (launch overhead
dominates at small N). Shapes and units as documented on `Model` and `SimConfig`; the struct holds the
Model's arrays by reference, not copies, so simulators with different settings share one Model."""
import functools

import warp as wp

f64 = wp.float64


@wp.struct
class DeviceModel:
    nb: int
    nv: int
    nc: int
    gravity: wp.vec3d
    kappa: f64
    contact_speculative: f64
    contact_stabilization: f64
    frictionloss_scale: f64
    frictionloss_velocity: f64
    limit_stiffness: f64
    limit_damping: f64
    body_parent: wp.array(dtype=int)
    body_dof: wp.array(dtype=int)
    body_pos: wp.array(dtype=wp.vec3d)
    body_quat: wp.array(dtype=wp.quatd)
    body_mass: wp.array(dtype=f64)
    body_com: wp.array(dtype=wp.vec3d)
    body_inertia: wp.array(dtype=wp.mat33d)
    jnt_axis: wp.array(dtype=wp.vec3d)
    jnt_anchor: wp.array(dtype=wp.vec3d)
    dof_body: wp.array(dtype=int)
    dof_joint: wp.array(dtype=int)
    dof_armature: wp.array(dtype=f64)
    dof_damping: wp.array(dtype=f64)
    dof_frictionloss: wp.array(dtype=f64)
    dof_lower: wp.array(dtype=f64)
    dof_upper: wp.array(dtype=f64)
    dof_limited: wp.array(dtype=int)
    tau_limit: wp.array(dtype=f64)
    pair_i: wp.array(dtype=int)
    pair_j: wp.array(dtype=int)
    dof_row_start: wp.array(dtype=int)
    sphere_body: wp.array(dtype=int)
    sphere_pos: wp.array(dtype=wp.vec3d)
    sphere_radius: wp.array(dtype=f64)
    sphere_friction: wp.array(dtype=f64)
    contact_dof_d: wp.array(dtype=int)
    contact_dof_start: wp.array(dtype=int)
    sphere_common: wp.array2d(dtype=int)
    sphere_leg: wp.array(dtype=int)
    leg_dof_start: wp.array(dtype=int)
    leg_dof: wp.array(dtype=int)


def device_model(model, cfg, variation=None) -> DeviceModel:
    """The struct for `model` (a `Model`: its arrays by reference) run with `cfg` (a `SimConfig`: its
    solver constants by value) and `variation` (a `PhysicsVariation` or None: the varied arrays are
    copies owned by the struct, the Model is untouched)."""
    d = DeviceModel()
    d.nb, d.nv, d.nc = model.nb, model.nv, model.nc
    d.gravity = wp.vec3d(*model.gravity)
    d.kappa = f64(cfg.kappa)
    d.contact_speculative = f64(cfg.contact_speculative)
    d.contact_stabilization = f64(cfg.contact_stabilization)
    d.frictionloss_scale = f64(cfg.frictionloss_scale)
    d.frictionloss_velocity = f64(cfg.frictionloss_velocity)
    d.limit_stiffness = f64(cfg.limit_stiffness)
    d.limit_damping = f64(cfg.limit_damping)
    for name in DeviceModel.vars:
        value = getattr(model, name, None)
        if isinstance(value, wp.array):
            setattr(d, name, value)
    if variation is not None:
        dev = model.device
        if variation.body_mass_offset is not None:
            d.body_mass = wp.array(model.body_mass.numpy() + variation.body_mass_offset, dtype=f64, device=dev)
        if variation.body_com_offset is not None:
            d.body_com = wp.array(model.body_com.numpy() + variation.body_com_offset, dtype=wp.vec3d, device=dev)
        if variation.friction_scale != 1.0:
            d.sphere_friction = wp.array(model.sphere_friction.numpy() * variation.friction_scale, dtype=f64,
                                         device=dev)
    return d


@functools.lru_cache(maxsize=None)
def empty_model_adjoint() -> DeviceModel:
    """The one adjoint every launch gets for its DeviceModel argument: empty (nothing in the model is
    differentiated), built once instead of per launch."""
    return DeviceModel()


class Tape(wp.Tape):
    """A wp.Tape that gives every recorded launch `empty_model_adjoint()` for the DeviceModel argument.
    A plain wp.Tape works too, but builds a fresh adjoint struct per launch in Python, which costs
    more than the kernels at small N."""

    def get_adjoint(self, a):
        if getattr(a, "_cls", None) is DeviceModel:
            return empty_model_adjoint()
        return super().get_adjoint(a)
