"""The imitation environment's reward terms, as data: a name, the config field of its weight, a sign
and the function of one step's outcome it weighs.

A term is `sign * weight * value(outcome)` per environment [per step], logged as `reward/<name>`
(the trainer adds its ADD term, `algo.reward`). A term is computed only when its weight is not 0,
except the paper's (`always`), which is computed and logged at any weight. An experiment adds a row
to `REWARD_TERMS` and a weight field (>= 0) to `ImitationEnvConfig`; the environment has no branch
per term. The terms are summed in the table's order (`algo.reward.total_reward`).
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Protocol, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from bcg_train.motion.body_error import mean_body_error

from .config import ImitationEnvConfig
from .features import PoseState
from .leg_clearance import LegClearance


@dataclass(frozen=True)
class StepOutcome:
    """What the reward terms of one control step read (N environments, n joints)."""

    action: Tensor
    """(N, n) this step's policy action (before any delay)."""
    last_action: Tensor
    """(N, n) the policy's action of the step before (0 after a restart)."""
    sim_pose: PoseState
    """The state the step reached."""
    ref_pose: PoseState
    """The reference at that state's frame."""
    body_err: Tensor
    """(N,) [m] the termination's mean body error (in `termination_body_frame`)."""
    terminated: Tensor
    """(N,) bool: the step ended in a failure."""


TermValue = Callable[[StepOutcome], Tensor]
"""One step's outcome -> (N,) the term before its weight."""


class TermHost(Protocol):
    """What a term's setup reads of the environment."""

    cfg: ImitationEnvConfig
    model: Any
    """The simulator's model (`body_names`)."""

    def feet(self) -> Dict[str, Tuple[str, np.ndarray, float]]: ...


@dataclass(frozen=True)
class RewardTerm:
    """One row of `REWARD_TERMS`."""

    name: str
    """Key of `EnvStep.reward_terms`, logged as reward/<name>."""
    weight: str
    """The `ImitationEnvConfig` field that holds its weight (>= 0)."""
    sign: float
    """+1: a reward; -1: a penalty."""
    setup: Callable[[TermHost], TermValue]
    """The environment -> the term's value function (built once, when the term is on)."""
    always: bool = False
    """Computed and logged even at weight 0 (the paper's terms)."""


def action_rate(env: TermHost) -> TermValue:
    """sum_j (action_scale (a_j - a_prev_j))^2 [rad^2]: the joint targets' change per control step."""
    scale = env.cfg.action_scale

    def value(s: StepOutcome) -> Tensor:
        return ((scale * (s.action - s.last_action)) ** 2).sum(dim=-1)
    return value


def alive(env: TermHost) -> TermValue:
    """1 for a step that does not end in a failure, else 0."""
    return lambda s: (~s.terminated).to(s.action.dtype)


def root_velocity(env: TermHost) -> TermValue:
    """exp(-|v_xy - v_ref_xy|^2 / root_velocity_sigma^2): the root's horizontal velocity in the world
    against the reference's [m/s]."""
    sigma = env.cfg.root_velocity_sigma

    def value(s: StepOutcome) -> Tensor:
        lag = ((s.sim_pose.root_lin_vel[:, :2] - s.ref_pose.root_lin_vel[:, :2]) ** 2).sum(dim=-1)     # (m/s)^2
        return torch.exp(-lag / sigma**2)
    return value


def failure_margin(env: TermHost) -> TermValue:
    """ramp(e, m L, L) + ramp(p, m P, P) (`ImitationEnvConfig.failure_margin_penalty`): the
    termination's body error e against its limit L, the posture error p (body error with the root's
    horizontal drift removed) against P = `posture_error_limit_m`, m = `failure_margin`."""
    c = env.cfg

    def value(s: StepOutcome) -> Tensor:
        posture = s.body_err if c.termination_body_frame == "root_xy" else \
            mean_body_error(s.sim_pose.body_pos, s.ref_pose.body_pos, True)
        return (ramp(s.body_err, c.failure_margin * c.termination_body_error, c.termination_body_error)
                + ramp(posture, c.failure_margin * c.posture_error_limit_m, c.posture_error_limit_m))
    return value


def leg_clearance(env: TermHost) -> TermValue:
    """`LegClearance.penalty` of the bodies the step reached (the legs' balls and the feet's spheres)."""
    clearance = LegClearance(env.model.body_names, env.cfg.leg_clearance_margin_m, env.feet())
    return lambda s: clearance.penalty(s.sim_pose.body_pos, s.sim_pose.body_quat)


REWARD_TERMS: Tuple[RewardTerm, ...] = (
    RewardTerm("action_rate", "action_rate_scale", -1.0, action_rate, always=True),
    RewardTerm("alive", "alive_reward", 1.0, alive),
    RewardTerm("root_velocity", "root_velocity_reward", 1.0, root_velocity),
    RewardTerm("failure_margin", "failure_margin_penalty", -1.0, failure_margin),
    RewardTerm("leg_clearance", "leg_clearance_penalty", -1.0, leg_clearance),
)
"""The environment's reward terms, in the order they are summed."""


@dataclass(frozen=True)
class ActiveTerm:
    name: str
    coefficient: float
    """sign * weight."""
    value: TermValue


def active_terms(env: TermHost, terms: Sequence[RewardTerm] = REWARD_TERMS) -> List[ActiveTerm]:
    """The `terms` `env.cfg` turns on (weight not 0, or `always`), set up for `env`."""
    return [ActiveTerm(t.name, t.sign * getattr(env.cfg, t.weight), t.setup(env))
            for t in terms if t.always or getattr(env.cfg, t.weight)]


def evaluate(terms: Sequence[ActiveTerm], outcome: StepOutcome) -> Mapping[str, Tensor]:
    """name -> (N,) weighted term of one step."""
    return {t.name: t.coefficient * t.value(outcome) for t in terms}


def ramp(x: Tensor, start: float, end: float) -> Tensor:
    """(relu(x - start) / (end - start))^2: 0 up to `start`, 1 at `end`, growing on (same shape as x)."""
    return (torch.relu(x - start) / (end - start)) ** 2
