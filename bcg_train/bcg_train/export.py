"""Export a training checkpoint as the ONNX policy the policy node runs.

The graph is the deterministic policy (the Gaussian's mean) with the observation normaliser inside:
raw observation `obs` [batch, obs_dim] -> raw action `actions` [batch, act_dim], float32, written
with torch's legacy (TorchScript) exporter into a single file. The policy contract recorded in the
checkpoint (joints, gains, default pose, action scale, observation spec, control period, kappa,
motion) goes into the file's metadata through `bcg.contract.write_policy`. Before returning, the
written file is run in onnxruntime and compared with the torch policy.

    bcg-export CHECKPOINT -o policy.onnx [--description TEXT]

CHECKPOINT is a checkpoint file, or a run folder (its newest checkpoint).
"""
import argparse
import dataclasses
import io
import os
import sys
import warnings
from pathlib import Path
from typing import Optional, Sequence, Tuple

import numpy as np
import onnx
import torch
from torch import nn

from bcg.contract import ContractError, PolicyContract, PolicyFileError, write_policy

from .checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from .train_config import ALGORITHMS, ConfigError, config_from_dict

OPSET = 17
INPUT_NAME, OUTPUT_NAME = "obs", "actions"
CHECK_SAMPLES = 256
"""Observations (standard normal, fixed seed) on which onnxruntime must match torch."""
TOLERANCE = 1e-4
"""Largest allowed |onnxruntime - torch| per action, relative to max(1, max |action|)."""


class ExportError(RuntimeError):
    """The checkpoint cannot be exported, or the exported file disagrees with torch."""


def to_onnx(policy: nn.Module, obs_dim: int) -> onnx.ModelProto:
    """`policy` (float32 [batch, obs_dim] -> [batch, act_dim]) as an ONNX model, via the legacy exporter."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the legacy exporter is chosen on purpose (one self-contained file)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(policy, (torch.zeros(1, obs_dim),), buffer, dynamo=False, opset_version=OPSET,
                          input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                          dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}})
    return onnx.load_from_string(buffer.getvalue())


def onnxruntime_error(path: Path, policy: nn.Module, obs_dim: int) -> float:
    """max |onnxruntime - torch| / max(1, max |torch|) over CHECK_SAMPLES observations."""
    import onnxruntime as ort
    obs = torch.randn(CHECK_SAMPLES, obs_dim, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = policy(obs).numpy()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run([OUTPUT_NAME], {INPUT_NAME: obs.numpy()})[0]
    return float(np.max(np.abs(got - expected)) / max(1.0, float(np.max(np.abs(expected)))))


def export_checkpoint(checkpoint: Path, out: Path, description: Optional[str] = None) -> Tuple[Path, float]:
    """Write the policy of `checkpoint` to `out`; returns (path, onnxruntime-vs-torch relative error)."""
    path = find_checkpoint(checkpoint)
    return export_state(load_checkpoint(path), path, out, description)


def export_state(state: dict, path: Path, out: Path, description: Optional[str] = None) -> Tuple[Path, float]:
    """`export_checkpoint` for a checkpoint already loaded (`state`, read from `path`)."""
    try:
        cfg = config_from_dict(state["config"])
        contract = PolicyContract.from_metadata(state["contract"])
    except (ConfigError, ContractError) as e:
        raise ExportError(f"checkpoint {path}: {e}") from None
    dims = state["dims"]
    policy = ALGORITHMS[state["algorithm_name"]].policy(state["algorithm"], cfg, dims["obs"], dims["act"])
    text = description or (f"{state['algorithm_name']} iteration {state['iteration']} of {path.parent.parent.name} "
                           f"(motion {contract.motion}, kappa {contract.contact_stiffness:g} 1/m)")
    contract = dataclasses.replace(contract, description=text)
    out = Path(out)
    candidate = out.with_name(f".{out.name}.unchecked.onnx")    # checked before it replaces `out`
    try:
        write_policy(candidate, to_onnx(policy, dims["obs"]), contract)
        error = onnxruntime_error(candidate, policy, dims["obs"])
        if not error <= TOLERANCE:
            raise ExportError(f"{out}: onnxruntime differs from torch by {error:.3g} (relative), more than "
                              f"{TOLERANCE:g}; {out} was left as it was")
        os.replace(candidate, out)
    except (ContractError, PolicyFileError) as e:
        raise ExportError(f"checkpoint {path}: {e}") from None
    finally:
        if candidate.exists():
            candidate.unlink()
    return out, error


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="bcg-export", description="Export a training checkpoint as an ONNX policy "
                                     "with its policy contract in the metadata.")
    parser.add_argument("checkpoint", type=Path, help="checkpoint file, or a run folder (its newest checkpoint)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="ONNX file to write")
    parser.add_argument("--description", help="free text stored in the contract (default: run, iteration, motion)")
    args = parser.parse_args(argv)
    try:
        path, error = export_checkpoint(args.checkpoint, args.output, args.description)
    except (CheckpointError, ExportError) as e:
        print(f"bcg-export: {e}", file=sys.stderr)
        return 1
    print(f"wrote {path} (onnxruntime vs torch: max relative difference {error:.2g})")
    return 0
