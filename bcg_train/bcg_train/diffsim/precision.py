"""The simulator's floating-point precision: float64 (the default: finite-difference tests, MuJoCo
validation) or float32 (training on GPUs whose float64 throughput is a small fraction of their float32).

One source, one package per precision: `bcg_train.diffsim` is the float64 simulator, and
`flavour("float32")` loads the same files again as the package `bcg_train.diffsim_float32`, whose
modules read float32 types. Every module of the package takes its Warp, NumPy and torch types from
`scalar_types(__name__)`, so Warp compiles each kernel once per precision and nothing is copied.
Modules without precision (`SHARED_MODULES`: the settings, the physics variation, the errors, the
record of the tape recording now) are the float64 package's own in both, so a `SimConfig` or an
error class is one class. The Warp objects of the two packages do not mix: a simulator checks that
its model and its configuration are of its own precision.
"""
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import warp as wp

from .config import PRECISIONS, check_precision

PACKAGE = __name__.rsplit(".", 1)[0].split("_float", 1)[0]
"""The float64 package's name (bcg_train.diffsim), whichever flavour loaded this module."""
SHARED_MODULES = ("config", "variation", "errors", "tapes")
"""Modules of the package that hold no Warp type of a precision: loaded once, the same objects in every
flavour (the tapes: Warp has one active tape, whichever flavour's)."""


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


def package_name(precision: str) -> str:
    """The package that simulates in `precision`."""
    check_precision(precision)
    return PACKAGE if precision == "float64" else f"{PACKAGE}_{precision}"


def precision_of(module_name: str) -> str:
    """The precision of the package flavour that `module_name` belongs to."""
    for precision in PRECISIONS[1:]:
        name = f"{PACKAGE}_{precision}"
        if module_name == name or module_name.startswith(name + "."):
            return precision
    return "float64"


def scalar_types(module_name: str) -> ScalarTypes:
    """The types a module of the package uses: `scalar_types(__name__)`."""
    return TYPES[precision_of(module_name)]


def flavour(precision: str) -> ModuleType:
    """The simulator package of `precision` (`bcg_train.diffsim` itself for float64), loaded once."""
    name = package_name(precision)
    if name in sys.modules:
        return sys.modules[name]
    if precision == "float64":
        return importlib.import_module(name)
    folder = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    added = [name] + [f"{name}.{shared}" for shared in SHARED_MODULES]
    sys.modules[name] = module
    for shared in SHARED_MODULES:
        sys.modules[f"{name}.{shared}"] = importlib.import_module(f"{PACKAGE}.{shared}")
    try:
        spec.loader.exec_module(module)
    except BaseException:
        for key in added:
            sys.modules.pop(key, None)
        raise
    return module
