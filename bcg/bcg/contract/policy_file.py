"""An exported policy on disk: one ONNX file whose `metadata_props` carry its `PolicyContract`.

`write_policy` stamps a contract into an ONNX model and saves it atomically (training uses it);
`load_policy` reads one back, checks the graph against its contract and opens an onnxruntime
session (the node uses it). Every refusal is a `PolicyFileError` naming the file and the problem.
onnx is imported where a file is read or written: importing the contract does not load it; nor does
reading a file whose exact bytes passed the check before, given the verdicts (`CheckedPolicies`).
"""
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional, Union

import numpy as np

from bcg.atomic_file import write_atomic

from .checked_policies import CheckedPolicies
from .metadata import ContractError, PolicyContract

if TYPE_CHECKING:
    import onnx

PathLike = Union[str, Path]


class PolicyFileError(ValueError):
    """A policy file cannot be used; the message names the file and the problem."""


def _dims(value_info) -> List[Optional[int]]:
    """Static dims of an ONNX input/output (None where symbolic or unknown)."""
    return [d.dim_value if d.HasField("dim_value") else None for d in value_info.type.tensor_type.shape.dim]


def check_graph(model: "onnx.ModelProto", contract: PolicyContract) -> None:
    """One float input [batch, obs] and one float output [batch, n] matching the contract, the batch
    symbolic or 1 (the node runs one observation at a time).

    Raises ContractError naming the size that disagrees.
    """
    from onnx import TensorProto
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    outputs = list(model.graph.output)
    if len(inputs) != 1 or len(outputs) < 1:
        raise ContractError(f"graph: expected one input and one output, found {len(inputs)} inputs and "
                            f"{len(outputs)} outputs")
    for role, vi, want, key in (("input", inputs[0], contract.observation.size, "observation"),
                                ("output", outputs[0], contract.num_joints, "joint_names")):
        if vi.type.tensor_type.elem_type != TensorProto.FLOAT:
            raise ContractError(f"graph {role} {vi.name!r}: expected float32")
        dims = _dims(vi)
        if len(dims) != 2 or dims[1] != want:
            raise ContractError(f"graph {role} {vi.name!r}: shape {dims}, but the metadata ({key}) "
                                f"implies [batch, {want}]")
        if dims[0] not in (None, 1):
            raise ContractError(f"graph {role} {vi.name!r}: shape {dims}, a batch of {dims[0]}: the batch "
                                "dimension must be symbolic or 1 (one observation at a time)")


def write_policy(path: PathLike, model: "onnx.ModelProto", contract: PolicyContract) -> Path:
    """Stamp `contract` into `model`'s metadata (replacing any old contract keys) and save it atomically."""
    import onnx
    check_graph(model, contract)
    meta = contract.to_metadata()
    kept = [p for p in model.metadata_props if p.key not in meta]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    for k, v in meta.items():
        model.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(model)
    return write_atomic(path, lambda f: f.write(model.SerializeToString()))


def read_model(path: PathLike) -> "onnx.ModelProto":
    """Parse the ONNX file; PolicyFileError when it is missing or not a valid ONNX model."""
    import onnx
    path = Path(path)
    if not path.is_file():
        raise PolicyFileError(f"policy file {path}: does not exist")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as e:  # protobuf DecodeError, ValidationError, ...: all mean "corrupt"
        raise PolicyFileError(f"policy file {path}: not a valid ONNX model ({type(e).__name__}: {e})") from None
    return model


def read_contract(path: PathLike, checked: Optional[CheckedPolicies] = None) -> PolicyContract:
    """The contract of the policy at `path`, validated against its graph.

    With `checked`: a file whose bytes passed this check before (same onnx, protobuf and contract
    code) is not parsed again, so onnx is not loaded: its contract is read from the metadata
    remembered then; a file that passes now is remembered. What is refused is the same either way."""
    data = _bytes_of(Path(path)) if checked is not None else None
    remembered = checked.metadata(data) if checked is not None and data is not None else None
    if remembered is not None:
        return _contract(path, remembered)
    model = read_model(path)
    metadata = {p.key: p.value for p in model.metadata_props}
    contract = _contract(path, metadata)
    try:
        check_graph(model, contract)
    except ContractError as e:
        raise PolicyFileError(f"policy file {path}: {e}") from None
    if checked is not None and data is not None and model.SerializeToString() == data:
        checked.remember(data, metadata)
    return contract


def _bytes_of(path: Path) -> Optional[bytes]:
    """The file's bytes; None when it cannot be read (`read_model` then says why)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def _contract(path: PathLike, metadata) -> PolicyContract:
    try:
        return PolicyContract.from_metadata(metadata)
    except ContractError as e:
        raise PolicyFileError(f"policy file {path}: {e}") from None


@dataclass
class Policy:
    """A loaded policy: its contract and an onnxruntime session."""

    path: Path
    contract: PolicyContract
    session: Any
    """The onnxruntime InferenceSession."""
    input_name: str
    output_name: str

    def __call__(self, observation: np.ndarray) -> np.ndarray:
        """Raw action (n,) float32 for one observation (obs,)."""
        obs = np.ascontiguousarray(observation, dtype=np.float32).reshape(1, -1)
        return self.session.run([self.output_name], {self.input_name: obs})[0].reshape(-1)


def load_policy(path: PathLike, intra_op_threads: int = 1, checked: Optional[CheckedPolicies] = None) -> Policy:
    """Read, validate and open the policy at `path` for inference on the CPU (`checked`: as `read_contract`)."""
    import onnxruntime as ort
    path = Path(path)
    contract = read_contract(path, checked)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = intra_op_threads
    opts.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise PolicyFileError(f"policy file {path}: onnxruntime cannot load it ({e})") from None
    policy = Policy(path, contract, session, session.get_inputs()[0].name, session.get_outputs()[0].name)
    try:
        out = policy(np.zeros(contract.observation.size, np.float32))
    except Exception as e:      # onnxruntime's errors: the graph cannot run on one observation
        raise PolicyFileError(f"policy file {path}: onnxruntime cannot run it on one observation ({e})") from None
    if out.shape != (contract.num_joints,):
        raise PolicyFileError(f"policy file {path}: output has {out.size} values for {contract.num_joints} joints")
    return policy
