"""Differentiable, batched G1 simulator in Warp with smoothed stiff impulse contact.

Public API (Model / State / Control / Simulator, as Warp's physics code has them):
- `Model.from_mujoco(path, precision=...)`: the robot's physics data, built once, in float64 (the
  default) or float32 (`precision`: every module is loaded once, its Warp code built per precision);
- `SimConfig` (with `BundleConfig` and its `BundleExperiments`): the solver's settings, given to each simulator;
- `Simulator(model, num_envs, config, requires_grad)`, `sim.step(state_in, state_out, control, dt)`;
- `torch_bridge`: the one bridge to PyTorch.
Inside: `substep` (the physics of one substep), `segment` (what a simulator keeps between steps),
`step_graphs` (steps captured as graphs and replayed, `Simulator(..., capture_graphs=True)`),
`kernels`, `solvers` (sparse LDL, contact), `bundling`, and `mujoco_reference` (the comparisons
against MuJoCo that tests and benches share).
"""
import importlib

from .config import PRECISIONS, BundleConfig, BundleExperiments, SimConfig
from .errors import ModelError, NonFiniteStateError, StaleTapeError, TapeRequiredError
from .variation import PhysicsVariation

_LAZY = {"BundleStats": ".bundling", "Tape": ".kernels.device_model", "Model": ".model",
         "Simulator": ".simulator", "Control": ".state", "State": ".state"}
"""Names whose modules load Warp and MuJoCo: imported on first use, so that the settings above (and
whatever only needs them, e.g. the training configuration) import without either."""


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BundleConfig", "BundleExperiments", "ModelError", "NonFiniteStateError", "PRECISIONS", "PhysicsVariation",
           "SimConfig", "StaleTapeError", "TapeRequiredError", *_LAZY]
