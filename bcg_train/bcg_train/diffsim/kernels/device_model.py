"""`DeviceModel`: a Model's arrays plus one simulator's solver constants as one Warp struct, so each
kernel launch packs a single argument for the whole robot instead of a dozen arrays (launch overhead
dominates at small N). Shapes and units as documented on `Model` and `SimConfig`; the struct holds the
Model's arrays by reference, not copies, so simulators with different settings share one Model."""
import functools

import warp as wp

from ..precision import scalar_types

T = scalar_types(__name__)
real, vec3, quat, mat33 = T.real, T.vec3, T.quat, T.mat33



@wp.struct
class DeviceModel:
    nb: int
    nv: int
    nc: int
    gravity: vec3
    kappa: real
    contact_speculative: real
    contact_stabilization: real
    frictionloss_scale: real
    frictionloss_velocity: real
    limit_stiffness: real
    limit_damping: real
    body_parent: wp.array(dtype=int)
    body_dof: wp.array(dtype=int)
    body_pos: wp.array(dtype=vec3)
    body_quat: wp.array(dtype=quat)
    body_mass: wp.array(dtype=real)
    body_com: wp.array(dtype=vec3)
    body_inertia: wp.array(dtype=mat33)
    jnt_axis: wp.array(dtype=vec3)
    jnt_anchor: wp.array(dtype=vec3)
    dof_body: wp.array(dtype=int)
    dof_joint: wp.array(dtype=int)
    dof_armature: wp.array(dtype=real)
    dof_damping: wp.array(dtype=real)
    dof_frictionloss: wp.array(dtype=real)
    dof_lower: wp.array(dtype=real)
    dof_upper: wp.array(dtype=real)
    dof_limited: wp.array(dtype=int)
    tau_limit: wp.array(dtype=real)
    pair_i: wp.array(dtype=int)
    pair_j: wp.array(dtype=int)
    dof_row_start: wp.array(dtype=int)
    sphere_body: wp.array(dtype=int)
    sphere_pos: wp.array(dtype=vec3)
    sphere_radius: wp.array(dtype=real)
    sphere_friction: wp.array(dtype=real)
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
    d.gravity = vec3(*model.gravity)
    d.kappa = real(cfg.kappa)
    d.contact_speculative = real(cfg.contact_speculative)
    d.contact_stabilization = real(cfg.contact_stabilization)
    d.frictionloss_scale = real(cfg.frictionloss_scale)
    d.frictionloss_velocity = real(cfg.frictionloss_velocity)
    d.limit_stiffness = real(cfg.limit_stiffness)
    d.limit_damping = real(cfg.limit_damping)
    for name in DeviceModel.vars:
        value = getattr(model, name, None)
        if isinstance(value, wp.array):
            setattr(d, name, value)
    if variation is not None:
        dev = model.device
        if variation.body_mass_offset is not None:
            d.body_mass = wp.array(model.body_mass.numpy() + variation.body_mass_offset, dtype=real, device=dev)
        if variation.body_com_offset is not None:
            d.body_com = wp.array(model.body_com.numpy() + variation.body_com_offset, dtype=vec3, device=dev)
        if variation.friction_scale != 1.0:
            d.sphere_friction = wp.array(model.sphere_friction.numpy() * variation.friction_scale, dtype=real,
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
