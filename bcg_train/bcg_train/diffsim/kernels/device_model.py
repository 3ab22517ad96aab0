"""`DeviceModel`: a Model's arrays plus one simulator's solver constants as one Warp struct, so each
kernel launch packs a single argument for the whole robot instead of a dozen arrays (launch overhead
dominates at small N). Shapes and units as documented on `Model` and `SimConfig`; the struct holds the
Model's arrays by reference, not copies, so simulators with different settings share one Model.

What a simulator's physics may vary (`Substep.vary`: the solver constants, and the body masses,
centres of mass and sphere frictions of a `PhysicsVariation`) lives in arrays the struct owns, which
`write_physics` overwrites in place: the struct, and so every launch that packed it (a captured graph
included, see diffsim.step_graphs), stays valid and reads the new values. The solver constants are
one array `solver`, indexed by the constants below (e.g. `mdl.solver[KAPPA]`)."""
from functools import cached_property
from typing import Dict, Optional

import numpy as np
import warp as wp

from ..precision import TYPES, ScalarTypes, WarpDefinitions
from ..tapes import RecordingTape


class DeviceModelStruct(WarpDefinitions):
    """`DeviceModel` in one precision (`DeviceModelStruct.of(types).DeviceModel`) and the one empty
    adjoint of its instances."""

    @cached_property
    def DeviceModel(self):
        real, vec3, quat, mat33 = self.T.real, self.T.vec3, self.T.quat, self.T.mat33

        class DeviceModel:
            nb: int
            nv: int
            nc: int
            gravity: vec3
            solver: wp.array(dtype=real)
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

        return wp.struct(DeviceModel, module=self.module)

    @cached_property
    def empty_adjoint(self):
        """The one adjoint every launch gets for its DeviceModel argument: empty (nothing in the model
        is differentiated), built once instead of per launch."""
        return self.DeviceModel()


SOLVER_CONSTANTS = ("kappa", "contact_speculative", "contact_stabilization", "frictionloss_scale",
                    "frictionloss_velocity", "limit_stiffness", "limit_damping", "contact_relaxation")
"""The `SimConfig` fields in `DeviceModel.solver`, in this order."""
(KAPPA, CONTACT_SPECULATIVE, CONTACT_STABILIZATION, FRICTIONLOSS_SCALE, FRICTIONLOSS_VELOCITY, LIMIT_STIFFNESS,
 LIMIT_DAMPING, CONTACT_RELAXATION) = (wp.constant(i) for i in range(len(SOLVER_CONSTANTS)))

VARIED_ARRAYS = ("body_mass", "body_com", "sphere_friction")
"""The Model arrays a `PhysicsVariation` changes: the struct holds copies of these."""


def device_model(model, cfg):
    """The struct (a `DeviceModel` of the model's precision) for `model` (a `Model`: its arrays by
    reference, but copies of VARIED_ARRAYS) with the solver constants of `cfg` (a `SimConfig`); the
    Model is never changed."""
    struct = DeviceModelStruct.of(model.types).DeviceModel
    d = struct()
    d.nb, d.nv, d.nc = model.nb, model.nv, model.nc
    d.gravity = model.types.vec3(*model.gravity)
    for name in struct.vars:
        value = getattr(model, name, None)
        if isinstance(value, wp.array):
            setattr(d, name, wp.clone(value) if name in VARIED_ARRAYS else value)
    d.solver = wp.array(_solver_constants(cfg), dtype=model.types.real, device=model.device)
    return d


def nominal_physics(model) -> Dict[str, np.ndarray]:
    """Host copies of `model`'s VARIED_ARRAYS, which `write_physics` varies (read once, so that it
    asks the device nothing)."""
    return {name: getattr(model, name).numpy().copy() for name in VARIED_ARRAYS}


def write_physics(d, nominal: Dict[str, np.ndarray], cfg, variation) -> None:
    """Overwrite, in place, the solver constants of `d` with those of `cfg` (a `SimConfig`) and its
    VARIED_ARRAYS with `nominal` (`nominal_physics` of its Model) changed by `variation` (a
    `PhysicsVariation`). Only copies to the device; launches that already packed `d` read the new
    values when they next run."""
    mass, com = nominal["body_mass"], nominal["body_com"]
    if variation.body_mass_offset is not None:
        mass = mass + variation.body_mass_offset
    if variation.body_com_offset is not None:
        com = com + variation.body_com_offset
    d.solver.assign(_solver_constants(cfg))
    d.body_mass.assign(mass)
    d.body_com.assign(com)
    d.sphere_friction.assign(nominal["sphere_friction"] * variation.friction_scale)


def _solver_constants(cfg) -> np.ndarray:
    return np.array([getattr(cfg, name) for name in SOLVER_CONSTANTS], dtype=np.float64)


def model_types(value) -> Optional[ScalarTypes]:
    """The precision of `value` when it is a `DeviceModel` (of either precision), else None."""
    cls = getattr(value, "_cls", None)
    if cls is not None:
        for types in TYPES.values():
            if DeviceModelStruct.of(types).DeviceModel is cls:
                return types
    return None


def empty_model_adjoint(value):
    """The empty adjoint of `value`'s precision when it is a `DeviceModel`, else None."""
    types = model_types(value)
    return None if types is None else DeviceModelStruct.of(types).empty_adjoint


class Tape(RecordingTape):
    """The simulator's tape: a wp.Tape that the simulator finds while it records (diffsim.tapes) and
    that gives every recorded launch `empty_model_adjoint` for the DeviceModel argument (a plain
    wp.Tape would build a fresh adjoint struct per launch in Python, which costs more than the
    kernels at small N)."""

    def get_adjoint(self, a):
        empty = empty_model_adjoint(a)
        return super().get_adjoint(a) if empty is None else empty
