"""Evaluation of exported policies in MuJoCo and in the training simulator (`bcg-eval`)."""
from .plants import MujocoPlant, PlantState, WarpPlant
from .rollout import RunResult, run_policy

__all__ = ["MujocoPlant", "PlantState", "RunResult", "WarpPlant", "run_policy"]
