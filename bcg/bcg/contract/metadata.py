"""The policy contract: what an exported policy needs the robot side to know, and its metadata form.

A policy is one ONNX file; its `metadata_props` carry a `PolicyContract` as string key/values (JSON
values). `PolicyContract.to_metadata` writes that form and `PolicyContract.from_metadata` reads and
validates it; `bcg.contract.policy_file` puts it into / takes it out of the ONNX file.

Action convention: the policy outputs one raw action per contract joint (policy order); the joint
position target is `default_joint_pos + action_scale * action`, tracked with `joint_stiffness`
(kp) and `joint_damping` (kd).
"""
import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Tuple

import numpy as np

from .observation import ObservationSpec, ObservationSpecError

CONTRACT_VERSION = 1
"""Version of the metadata layout written by this module (key `bcg_contract`)."""

KEYS = ("bcg_contract", "joint_names", "joint_stiffness", "joint_damping", "default_joint_pos",
        "action_scale", "observation", "control_period_s", "contact_stiffness", "motion", "motion_lead_in_s",
        "description", "simulator", "randomization")
"""Every metadata key of the contract."""
OPTIONAL_KEYS = {"motion_lead_in_s": 0.0, "description": "", "simulator": {}, "randomization": {}}
"""Keys a file may lack, with the value they then take."""


class ContractError(ValueError):
    """The contract is missing or inconsistent; the message names the metadata key."""


def _vector(key: str, value, n: int, nonnegative: bool = False) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ContractError(f"{key}: expected a list of {n} numbers, got {value!r}") from None
    if arr.shape != (n,):
        raise ContractError(f"{key}: expected {n} values (one per joint in joint_names), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ContractError(f"{key}: contains NaN or Inf")
    if nonnegative and np.any(arr < 0):
        raise ContractError(f"{key}: contains negative values")
    return arr


@dataclass(frozen=True)
class PolicyContract:
    """A policy's contract. Arrays are (n,) in the policy's joint order (`joint_names`)."""

    joint_names: Tuple[str, ...]
    """Joint (MuJoCo / URDF) names in the order of the policy's actions and joint observations."""
    kp: np.ndarray
    """N m/rad, PD stiffness per joint."""
    kd: np.ndarray
    """N m s/rad, PD damping per joint."""
    default_joint_pos: np.ndarray
    """rad, the pose an all-zero action commands."""
    action_scale: np.ndarray
    """rad per unit action, per joint."""
    observation: ObservationSpec
    """The observation layout (named terms, sizes, scales)."""
    control_period_s: float
    """s, the policy period (0.02 for 50 Hz)."""
    contact_stiffness: float
    """1/m, the contact smoothing stiffness kappa it was trained with (0: not trained with BCG contact)."""
    motion: str
    """Name of the reference motion it was trained to track ('' for none)."""
    motion_lead_in_s: float = 0.0
    """s over which its reference motion begins from rest (`bcg.motion.lead_in`): the node and the
    evaluation blend the motion they are given in over the same time, as training did; 0: none."""
    description: str = ""
    """Free text (origin, training run)."""
    simulator: Mapping[str, float] = field(default_factory=dict)
    """The training simulator's other settings by name (bcg_train.diffsim `SimConfig` fields such as
    substeps and contact_iterations), so that evaluation runs the physics the policy was trained in;
    empty: not recorded."""
    randomization: Mapping[str, Any] = field(default_factory=dict)
    """The domain randomisation it was trained with (bcg_train's `RandomizationConfig` fields: ranges
    as [low, high] lists, numbers, names); empty: none. Informational: the nodes do not read it."""

    def __post_init__(self):
        n = len(self.joint_names)
        if n == 0 or not all(isinstance(j, str) and j for j in self.joint_names):
            raise ContractError("joint_names: expected a non-empty list of non-empty strings")
        dup = sorted({j for j in self.joint_names if self.joint_names.count(j) > 1})
        if dup:
            raise ContractError(f"joint_names: duplicated {dup}")
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        object.__setattr__(self, "kp", _vector("joint_stiffness", self.kp, n, nonnegative=True))
        object.__setattr__(self, "kd", _vector("joint_damping", self.kd, n, nonnegative=True))
        object.__setattr__(self, "default_joint_pos", _vector("default_joint_pos", self.default_joint_pos, n))
        object.__setattr__(self, "action_scale", _vector("action_scale", self.action_scale, n))
        if not (isinstance(self.control_period_s, (int, float)) and 0 < self.control_period_s <= 1.0):
            raise ContractError(f"control_period_s: {self.control_period_s!r} is not in (0, 1] seconds")
        if not (isinstance(self.contact_stiffness, (int, float)) and np.isfinite(self.contact_stiffness)
                and self.contact_stiffness >= 0):
            raise ContractError(f"contact_stiffness: {self.contact_stiffness!r} is not a finite number >= 0")
        if not isinstance(self.motion, str):
            raise ContractError(f"motion: expected a string, got {self.motion!r}")
        if not (isinstance(self.motion_lead_in_s, (int, float)) and np.isfinite(self.motion_lead_in_s)
                and self.motion_lead_in_s >= 0):
            raise ContractError(f"motion_lead_in_s: {self.motion_lead_in_s!r} is not a finite number >= 0 seconds")
        if not isinstance(self.simulator, Mapping) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                for k, v in self.simulator.items()):
            raise ContractError(f"simulator: expected an object of setting name -> finite number, got "
                                f"{self.simulator!r}")
        object.__setattr__(self, "simulator", dict(self.simulator))
        if not isinstance(self.randomization, Mapping) or not all(isinstance(k, str) for k in self.randomization):
            raise ContractError(f"randomization: expected an object of setting name -> value, got "
                                f"{self.randomization!r}")
        object.__setattr__(self, "randomization", dict(self.randomization))
        try:
            self.observation.validate(n)
        except ObservationSpecError as e:
            raise ContractError(str(e)) from None

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    @property
    def control_hz(self) -> float:
        return 1.0 / self.control_period_s

    def to_metadata(self) -> Dict[str, str]:
        """The ONNX `metadata_props` form: key -> JSON string."""
        values = {
            "bcg_contract": CONTRACT_VERSION,
            "joint_names": list(self.joint_names),
            "joint_stiffness": self.kp.tolist(),
            "joint_damping": self.kd.tolist(),
            "default_joint_pos": self.default_joint_pos.tolist(),
            "action_scale": self.action_scale.tolist(),
            "observation": self.observation.to_json(),
            "control_period_s": float(self.control_period_s),
            "contact_stiffness": float(self.contact_stiffness),
            "motion": self.motion,
            "motion_lead_in_s": float(self.motion_lead_in_s),
            "description": self.description,
            "simulator": self.simulator,
            "randomization": self.randomization,
        }
        return {k: json.dumps(v) for k, v in values.items()}

    @classmethod
    def from_metadata(cls, props: Mapping[str, str]) -> "PolicyContract":
        """Parse and validate metadata; ContractError names the first bad or missing key."""
        if "bcg_contract" not in props:
            raise ContractError("bcg_contract: metadata key missing: this file carries no BCG policy contract "
                                "(export it with bcg.contract.write_policy)")
        values = {key: _json_value(props, key) for key in KEYS}
        if values["bcg_contract"] != CONTRACT_VERSION:
            raise ContractError(f"bcg_contract: version {values['bcg_contract']!r}, "
                                f"this reader knows {CONTRACT_VERSION}")
        names = values["joint_names"]
        if not isinstance(names, list):
            raise ContractError("joint_names: expected a list of strings")
        try:
            obs = ObservationSpec.from_json(values["observation"], len(names))
        except ObservationSpecError as e:
            raise ContractError(str(e)) from None
        for key in ("control_period_s", "contact_stiffness", "motion_lead_in_s"):
            if not isinstance(values[key], (int, float)) or isinstance(values[key], bool):
                raise ContractError(f"{key}: expected a number, got {values[key]!r}")
        return cls(joint_names=tuple(names), kp=values["joint_stiffness"], kd=values["joint_damping"],
                   default_joint_pos=values["default_joint_pos"], action_scale=values["action_scale"],
                   observation=obs, control_period_s=float(values["control_period_s"]),
                   contact_stiffness=float(values["contact_stiffness"]), motion=values["motion"],
                   motion_lead_in_s=float(values["motion_lead_in_s"]), description=str(values["description"]),
                   simulator=values["simulator"],
                   randomization=values["randomization"])


def _json_value(props: Mapping[str, str], key: str) -> Any:
    """Metadata `key`'s JSON value (its default when an optional key is missing); ContractError naming it."""
    if key not in props:
        if key in OPTIONAL_KEYS:
            return OPTIONAL_KEYS[key]
        raise ContractError(f"{key}: metadata key missing")
    try:
        return json.loads(props[key])
    except (TypeError, ValueError) as e:
        raise ContractError(f"{key}: not valid JSON ({e})") from None
