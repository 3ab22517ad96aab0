"""The interface between the training algorithms and a batched, differentiable environment.

N = `num_envs`. Every tensor lives on `device`. "Differentiable" means: part of the autograd graph
that starts at the actions passed to `step` in the current window (since the last `cut_graph`), so
SHAC can backpropagate a window's return through the simulator into the policy.
"""
from dataclasses import dataclass
from typing import Dict, Optional, Protocol, runtime_checkable

import torch
from torch import Tensor

from bcg.contract import PolicyContract


@dataclass
class EnvStep:
    """What one control step returns."""

    obs: Tensor
    """(N, obs_dim) float32, observation after the step; for an env that ended this step, the first
    observation of its new episode. Differentiable w.r.t. this and earlier actions of the window."""
    reward_terms: Dict[str, Tensor]
    """name -> (N,) differentiable task/regulariser rewards of this step, already multiplied by their
    config scales (e.g. "action_rate" <= 0). The trainer adds the ADD reward ("add") and logs each."""
    add_sim: Tensor
    """(N, F) ADD features phi of the simulated state reached by this step (before any reset);
    differentiable."""
    add_ref: Tensor
    """(N, F) ADD features phi of the reference at the same time; constant (no graph)."""
    terminated: Tensor
    """(N,) bool, the episode ended by failure this step: value 0 beyond."""
    truncated: Tensor
    """(N,) bool, the episode reached its time limit this step (and did not fail): bootstrap with
    the value of `obs_before_reset`."""
    obs_before_reset: Tensor
    """(N, obs_dim) observation of the state reached by this step, before any reset (differentiable);
    equal to `obs` where neither terminated nor truncated."""
    counters: Dict[str, float]
    """name -> number, logged as is once per iteration (value after the window's last step). Counts
    are running totals since construction, restored by `load_state_dict` (e.g. "branch_substeps");
    rates are this step's values (e.g. "triggered_fraction")."""
    fell: Optional[Tensor] = None
    """(N,) bool, the terminated episodes that ended because the robot fell (rather than because it
    drifted from the reference); None when the env does not tell them apart."""


@runtime_checkable
class DiffEnv(Protocol):
    """A batched environment, reset and stepped as a whole; ended episodes restart inside `step`."""

    num_envs: int
    """N, environments stepped together."""
    obs_dim: int
    """Length of an observation vector."""
    act_dim: int
    """Length of an action vector (one raw action per joint)."""
    add_dim: int
    """F, number of ADD features in `EnvStep.add_sim` / `add_ref`."""
    device: torch.device

    def reset(self) -> Tensor:
        """Reset every env; returns the (N, obs_dim) first observations (no graph)."""

    def step(self, actions: Tensor) -> EnvStep:
        """Advance every env one control step with `actions` (N, act_dim), the policy's raw outputs."""

    def cut_graph(self) -> None:
        """Detach the internal state: no gradient flows from later steps into earlier windows."""

    def policy_contract(self) -> PolicyContract:
        """The deployment contract of a policy trained here (joints, gains, default pose, action
        scale, observation spec, control period, kappa, motion name)."""

    def state_dict(self) -> dict:
        """Everything needed to continue bit-exactly: states, phases, counters, RNG. Only tensors,
        numbers, strings, None and (nested) lists/tuples/dicts of them: checkpoints are read with
        `torch.load(weights_only=True)`."""

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned (same construction arguments); its tensors arrive on the CPU."""
