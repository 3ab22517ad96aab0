"""The networks inside an exported policy (`bcg-export`'s ONNX file), read back for training.

An exported graph is the observation normaliser, (obs - mean) / (std + eps), then the actor's MLP,
whose weights keep their torch names (`actor.net.<i>.weight`, ...). What it lacks: the critics, the
ADD discriminator, the actor's exploration noise (log_std) and the normaliser's sample count. So a
run started from a policy file (`bcg-train --init-from POLICY.onnx`) gets the actor's mean network
and the normaliser's statistics from the file and fresh critics and discriminator (see
`ShacConfig.actor_warmup_iterations`, which holds the actor while they learn).
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from bcg.contract import ContractError, PolicyContract, PolicyFileError, read_contract

from .checkpoint import CheckpointError
from .export import INPUT_NAME

ACTOR_PREFIX = "actor."
"""Prefix of the actor's weights in an exported graph (the exported module's attribute name)."""


@dataclass
class PolicyWeights:
    """What a policy file holds of the trained networks."""

    contract: PolicyContract
    actor: Dict[str, torch.Tensor]
    """The actor's `state_dict` entries of its mean network (`net.*`), float32."""
    obs_mean: torch.Tensor
    """(obs_dim,) float64: the normaliser's mean."""
    obs_scale: torch.Tensor
    """(obs_dim,) float64: the normaliser's divisor, std + eps."""

    def obs_var(self, eps: float) -> torch.Tensor:
        """(obs_dim,) the normaliser's variance for a normaliser of `eps` (std = scale - eps)."""
        return (self.obs_scale - eps).clamp_min(0.0).square()


def read_policy_weights(path: Path) -> PolicyWeights:
    """The contract, actor weights and normaliser statistics of the exported policy at `path`;
    CheckpointError naming the file and what is missing when it is not a `bcg-export` graph."""
    try:
        contract = read_contract(path)          # also refuses a file that is not an ONNX model
    except (ContractError, PolicyFileError) as e:
        raise CheckpointError(f"policy {path}: {e}") from None
    model = onnx.load(str(path))
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    actor = {name[len(ACTOR_PREFIX):]: torch.from_numpy(np.array(value))
             for name, value in constants.items() if name.startswith(ACTOR_PREFIX)}
    nodes = list(model.graph.node)
    if (len(nodes) < 2 or [n.op_type for n in nodes[:2]] != ["Sub", "Div"] or nodes[0].input[0] != INPUT_NAME
            or nodes[1].input[0] != nodes[0].output[0] or not actor):
        raise CheckpointError(f"policy {path}: not a graph written by bcg-export (observation normaliser Sub, Div, "
                              f"then the actor's {ACTOR_PREFIX}* weights)")
    try:
        mean, scale = (constants[nodes[0].input[1]], constants[nodes[1].input[1]])
    except KeyError as e:
        raise CheckpointError(f"policy {path}: the normaliser's constant {e} is not in the graph") from None
    size = contract.observation.size
    if mean.shape != (size,) or scale.shape != (size,):
        raise CheckpointError(f"policy {path}: normaliser of {mean.shape} entries, its contract's observation has "
                              f"{size}")
    return PolicyWeights(contract, actor, torch.from_numpy(mean.astype(np.float64)),
                         torch.from_numpy(scale.astype(np.float64)))


def policy_start_warnings(actor_warmup_iterations: int, init_action_std: float) -> List[str]:
    """What a run started from a policy file should be told: the file has no critic and no
    exploration std, so with no warm-up the actor follows an untrained critic from the first
    iteration, and its std starts at `init_action_std` (the paper's 1.0 is noise of 0.25 rad per
    joint at every control step, which no trained balance survives). Empty when both are set."""
    out = []
    if actor_warmup_iterations == 0:
        out.append("shac.actor_warmup_iterations is 0: the actor learns from the new critics' first iteration "
                   "(e.g. --set shac.actor_warmup_iterations=200 holds it while they learn)")
    if init_action_std >= 0.5:
        out.append(f"shac.init_action_std is {init_action_std:g}: the policy file carries no exploration std, and "
                   "noise this large knocks over a policy that balances (e.g. --set shac.init_action_std=0.2)")
    return out
