"""Differentiable, batched G1 simulator in Warp with smoothed stiff impulse contact."""
from .config import SimConfig
from .model import Model, ModelError
from .simulator import NonFiniteStateError, Simulator
from .state import Control, State

__all__ = ["Control", "Model", "ModelError", "NonFiniteStateError", "SimConfig", "Simulator", "State"]
