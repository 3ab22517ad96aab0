"""The training reward: named terms, the ADD imitation reward plus the environment's terms."""
from typing import Dict

from torch import Tensor

from ..env_api import EnvStep
from .add import AdversarialDifferentialReward

ADD_TERM = "add"
"""Name of the ADD reward term."""


def reward_terms(step: EnvStep, add: AdversarialDifferentialReward) -> Dict[str, Tensor]:
    """name -> (N,) reward of one step: "add" plus `step.reward_terms` (already scaled by the env)."""
    if ADD_TERM in step.reward_terms:
        raise ValueError(f"reward_terms: the environment must not name a term {ADD_TERM!r} (the trainer's ADD term)")
    return {ADD_TERM: add.reward(step.add_sim, step.add_ref), **step.reward_terms}


def total_reward(terms: Dict[str, Tensor]) -> Tensor:
    """(N,) the sum of the terms."""
    return sum(terms.values())
