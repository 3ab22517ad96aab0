"""Differentiable, batched G1 simulator in Warp with smoothed stiff impulse contact."""
from . import contact_solver
from .bundling import BundleStats
from .config import BundleConfig, SimConfig
from .device_model import Tape
from .model import Model, ModelError
from .simulator import NonFiniteStateError, Simulator
from .state import Control, State

__all__ = ["BundleConfig", "BundleStats", "contact_solver", "Control", "Model", "ModelError", "NonFiniteStateError", "SimConfig", "Simulator", "State", "Tape"]
