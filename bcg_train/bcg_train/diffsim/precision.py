"""The simulator's floating-point precision: float64 (the default: finite-difference tests, MuJoCo
validation) or float32 (training on GPUs whose float64 throughput is a small fraction of their float32).

Every module is imported once. A module with Warp code defines it in a `WarpDefinitions` subclass
whose cached properties each build one wp.func, wp.struct or wp.kernel with the types of one
precision (`ScalarTypes`) closed over: `DynamicsKernels.of(types).kinematics` is the kinematics kernel
in `types`' precision, built with the module's other definitions on first use, once per precision,
and compiled with them (a Warp module per Python module and precision, so the float32 kernels never
recompile the float64 ones). The Python side takes the precision of the `Model` it is given
(`Model.precision`, `Model.types`), which a simulator's `SimConfig.precision` must match.
"""
import functools
import inspect
from dataclasses import dataclass

import numpy as np
import warp as wp

from .config import check_precision


@dataclass(frozen=True)
class ScalarTypes:
    """The types of one precision: Warp's scalar, vector, quaternion and matrix types, NumPy's dtype
    and torch's dtype name."""

    precision: str
    real: type
    vec3: type
    quat: type
    mat33: type
    spatial_vector: type
    spatial_matrix: type
    numpy: type

    @property
    def torch(self):
        """torch's dtype (torch is imported only by the modules that need it)."""
        import torch
        return getattr(torch, self.precision)


TYPES = {
    "float64": ScalarTypes("float64", wp.float64, wp.vec3d, wp.quatd, wp.mat33d, wp.spatial_vectord,
                           wp.spatial_matrixd, np.float64),
    "float32": ScalarTypes("float32", wp.float32, wp.vec3f, wp.quatf, wp.mat33f, wp.spatial_vectorf,
                           wp.spatial_matrixf, np.float32),
}


def scalar_types(precision: str) -> ScalarTypes:
    """The types of `precision` (ConfigError unless it is one of config.PRECISIONS)."""
    check_precision(precision)
    return TYPES[precision]


class WarpDefinitions:
    """A module's Warp definitions in the precision of `T` (see the module docstring): each a
    `functools.cached_property` that defines its Warp object with `self.T`'s types (`self.func`,
    `self.kernel`, or wp.struct in `self.module`) and returns it. `of(types)` is the one instance of a
    subclass per precision."""

    def __init__(self, types: ScalarTypes):
        self.T = types
        self.module = f"{type(self).__module__}.{types.precision}"
        """The Warp module of these definitions: the Python module's name and the precision."""

    @classmethod
    @functools.cache
    def of(cls, types: ScalarTypes):
        """The definitions of `cls` in `types`' precision, built once and all at once: a Warp module
        that gained a definition after its first launch would compile and load again."""
        definitions = cls(types)
        for name in dir(cls):
            if isinstance(inspect.getattr_static(cls, name), functools.cached_property):
                getattr(definitions, name)
        return definitions

    def func(self, f):
        """`wp.func` in this precision's Warp module, keyed by the function's name (as at a module's top level)."""
        return wp.func(f, name=f.__name__, module=self.module)

    def kernel(self, f=None, **options):
        """`wp.kernel` (with `options`, e.g. enable_backward) in this precision's Warp module, keyed by the
        function's name (as at a module's top level: what a kernel profile reports)."""
        if f is None:
            return functools.partial(self.kernel, **options)
        return wp.kernel(f, name=f.__name__, module=self.module, **options)
