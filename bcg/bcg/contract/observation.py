"""The policy's observation as a declarative spec: named terms, each with a size and a scale.

The same spec and the same term functions build the observation in the training environment
(torch tensors, batched over environments) and in the policy node (numpy arrays from LowState), so
the two can never drift apart. The spec travels inside the ONNX file (`bcg.contract.metadata`).

Conventions (both sides):
- quaternions are (w, x, y, z); the base quaternion rotates base-frame vectors into the world;
- joint arrays are in the *policy's* joint order (the contract's `joint_names`), shape (..., n);
- reference terms sample the reference motion `frames` control periods ahead of now, each frame
  contributing its per-frame size, concatenated frame by frame;
- every term is multiplied by its `scale` after it is computed.
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from bcg.motion.reference import ReferenceFrames
from bcg.rotations import array_namespace, projected_gravity, rot6d, rotation_matrix


class ObservationSpecError(ValueError):
    """The observation layout is malformed (the message names the term and field)."""


@dataclass(frozen=True)
class ObservationInputs:
    """Everything a term may read. Arrays are numpy or torch, with any leading batch shape (...)."""

    base_quat: Any
    """(..., 4) (w, x, y, z) pelvis orientation (LowState.imu_state.quaternion)."""
    base_ang_vel: Any
    """(..., 3) rad/s pelvis angular velocity in the base frame (LowState gyroscope)."""
    joint_pos: Any
    """(..., n) rad."""
    joint_vel: Any
    """(..., n) rad/s."""
    last_action: Any
    """(..., n) the policy's previous raw output (before action scale)."""
    default_joint_pos: Any
    """(n,) rad, the contract's default pose."""
    reference: Optional[ReferenceFrames] = None
    """Reference samples; required when the spec has reference terms."""


def _flatten_frames(x):
    """(..., F, k) -> (..., F * k)."""
    return x.reshape(tuple(x.shape[:-2]) + (-1,))


def _reference_columns(ref: ReferenceFrames, default_joint_pos):
    """The first two columns of each reference root rotation, as rows: (..., F, 2, 3)."""
    q = ref.root_quat
    return rot6d(q).reshape(tuple(q.shape[:-1]) + (2, 3))


def _reference_local_velocity(ref: ReferenceFrames, default_joint_pos):
    """The reference root velocity in the reference root's own frame, R_ref^T v_ref: (..., F * 3) m/s."""
    return _flatten_frames((ref.root_lin_vel[..., None, :] @ rotation_matrix(ref.root_quat))[..., 0, :])


def _ref_root_rot(inp: ObservationInputs, columns):
    """rot6d of the reference root rotation in the base frame, R_base^T R_ref, per frame: (..., F * 6).

    Row k of `columns @ R_base` is (R_base^T c_k)^T, c_k the reference's column k."""
    return _flatten_frames(_flatten_frames(columns @ rotation_matrix(inp.base_quat)[..., None, :, :]))


def _prepared(inp: ObservationInputs, prepared):
    return prepared


@dataclass(frozen=True)
class TermKind:
    """How one named term is computed and how big it is.

    A reference term splits into `prepare` (the part that depends on the reference samples and the
    default pose alone, which the node computes ahead of the policy step) and `compute`, which
    combines the robot's state with that part. Training runs both back to back, through `build`."""

    per_frame_size: Callable[[int], int]
    """Size as a function of the number of joints n (per reference frame for reference terms)."""
    compute: Callable[[ObservationInputs, Any], Any]
    """The term's value (..., size), before scaling, from the inputs and the term's prepared part
    (None for robot-state terms)."""
    prepare: Optional[Callable[[ReferenceFrames, Any], Any]] = None
    """Reference terms only: (reference samples, default pose (n,)) -> the prepared part."""
    description: str = ""

    @property
    def reference(self) -> bool:
        """True when the term samples the reference motion (needs `frames`)."""
        return self.prepare is not None


TERMS: Dict[str, TermKind] = {
    "base_ang_vel": TermKind(lambda n: 3, lambda i, _: i.base_ang_vel,
                             description="pelvis angular velocity, base frame, rad/s"),
    "projected_gravity": TermKind(lambda n: 3, lambda i, _: projected_gravity(i.base_quat),
                                  description="unit gravity vector in the base frame (z = -1 upright)"),
    "joint_pos": TermKind(lambda n: n, lambda i, _: i.joint_pos - i.default_joint_pos,
                          description="joint positions minus the default pose, rad"),
    "joint_vel": TermKind(lambda n: n, lambda i, _: i.joint_vel, description="joint velocities, rad/s"),
    "last_action": TermKind(lambda n: n, lambda i, _: i.last_action, description="previous raw action"),
    "ref_joint_pos": TermKind(lambda n: n, _prepared, lambda r, d: _flatten_frames(r.joint_pos - d),
                              description="reference joint positions minus default, rad"),
    "ref_joint_vel": TermKind(lambda n: n, _prepared, lambda r, d: _flatten_frames(r.joint_vel),
                              description="reference joint velocities, rad/s"),
    "ref_root_height": TermKind(lambda n: 1, _prepared, lambda r, d: r.root_pos[..., 2],
                                description="reference root height, m"),
    "ref_root_rot": TermKind(lambda n: 6, _ref_root_rot, _reference_columns,
                             description="reference root orientation in the base frame, 6-D rotation"),
    "ref_root_lin_vel": TermKind(lambda n: 3, _prepared, _reference_local_velocity,
                                 description="reference root linear velocity in the reference root's frame, m/s"),
}
"""Every term a spec may name. Add a term here and both training and the node get it."""


@dataclass(frozen=True)
class ObservationTerm:
    """One named slice of the observation vector."""

    name: str
    """A key of `TERMS`."""
    size: int
    """Number of observation entries this term fills (all frames together)."""
    scale: float = 1.0
    """Multiplier applied to the computed term."""
    frames: Tuple[int, ...] = ()
    """Reference terms only: future frames sampled, in control periods ahead of now (e.g. (1, 2, 3))."""

    def to_json(self) -> dict:
        d = {"name": self.name, "size": self.size, "scale": self.scale}
        if self.frames:
            d["frames"] = list(self.frames)
        return d


@dataclass(frozen=True)
class ObservationSpec:
    """The ordered terms of an observation vector."""

    terms: Tuple[ObservationTerm, ...]

    @property
    def size(self) -> int:
        """Total length of the observation vector."""
        return sum(t.size for t in self.terms)

    @property
    def frames(self) -> Tuple[int, ...]:
        """The reference frames the spec needs (all reference terms share them), () if none."""
        return next((t.frames for t in self.terms if t.frames), ())

    @property
    def needs_reference(self) -> bool:
        return any(TERMS[t.name].reference for t in self.terms)

    def to_json(self) -> list:
        return [t.to_json() for t in self.terms]

    @classmethod
    def from_json(cls, data: Any, num_joints: int) -> "ObservationSpec":
        """Parse and validate a layout against `num_joints`; ObservationSpecError names the problem."""
        if not isinstance(data, list) or not data:
            raise ObservationSpecError("observation: expected a non-empty list of terms")
        terms = []
        for k, d in enumerate(data):
            if not isinstance(d, dict):
                raise ObservationSpecError(f"observation[{k}]: expected an object with name/size/scale")
            unknown = set(d) - {"name", "size", "scale", "frames"}
            if unknown:
                raise ObservationSpecError(f"observation[{k}]: unknown field(s) {sorted(unknown)}")
            try:
                term = ObservationTerm(name=str(d["name"]), size=int(d["size"]),
                                       scale=float(d.get("scale", 1.0)),
                                       frames=tuple(int(f) for f in d.get("frames", ())))
            except KeyError as e:
                raise ObservationSpecError(f"observation[{k}]: missing field {e.args[0]!r}") from None
            except (TypeError, ValueError) as e:
                raise ObservationSpecError(f"observation[{k}]: {e}") from None
            terms.append(term)
        spec = cls(tuple(terms))
        spec.validate(num_joints)
        return spec

    def validate(self, num_joints: int) -> None:
        """Check every term exists, sizes match `num_joints`, and reference frames agree."""
        seen = set()
        for t in self.terms:
            where = f"observation term {t.name!r}"
            if t.name not in TERMS:
                raise ObservationSpecError(f"{where}: unknown term (known: {', '.join(TERMS)})")
            if t.name in seen:
                raise ObservationSpecError(f"{where}: appears twice")
            seen.add(t.name)
            kind = TERMS[t.name]
            if kind.reference and (not t.frames or any(f < 0 for f in t.frames)):
                raise ObservationSpecError(f"{where}: reference term needs non-negative 'frames'")
            if not kind.reference and t.frames:
                raise ObservationSpecError(f"{where}: 'frames' given for a term that samples no reference")
            if kind.reference and t.frames != self.frames:
                raise ObservationSpecError(f"{where}: frames {list(t.frames)} differ from {list(self.frames)}")
            expected = kind.per_frame_size(num_joints) * max(1, len(t.frames))
            if t.size != expected:
                raise ObservationSpecError(f"{where}: size {t.size}, expected {expected} for {num_joints} joints")
            if not np.isfinite(t.scale):
                raise ObservationSpecError(f"{where}: scale {t.scale} is not finite")

    def prepare(self, reference: ReferenceFrames, default_joint_pos) -> Tuple[Any, ...]:
        """The reference terms' prepared parts (None for robot-state terms), for `build(..., prepared)`.

        They depend on the reference samples and the default pose (n,) alone, so the node computes
        them before the LowState of its next policy step arrives."""
        parts = (TERMS[t.name].prepare for t in self.terms)
        return tuple(None if prepare is None else prepare(reference, default_joint_pos) for prepare in parts)

    def build(self, inputs: ObservationInputs, prepared: Optional[Tuple[Any, ...]] = None):
        """The observation (..., size) as float32 (numpy) or the inputs' dtype (torch).

        `prepared`: `prepare(...)` of the reference the inputs would carry (then `inputs.reference`
        is not read); None: prepared here from `inputs.reference`."""
        if prepared is None and self.needs_reference:
            if inputs.reference is None:
                raise ObservationSpecError("observation needs reference-motion terms but no motion was given")
            prepared = self.prepare(inputs.reference, inputs.default_joint_pos)
        elif prepared is None:
            prepared = (None,) * len(self.terms)
        xp = array_namespace(inputs.joint_pos)
        parts = [TERMS[t.name].compute(inputs, p) * t.scale for t, p in zip(self.terms, prepared)]
        out = xp.concatenate(parts, -1)
        return out.astype(np.float32) if xp is np else out


def robot_state_spec(num_joints: int, ang_vel_scale: float = 0.25, joint_vel_scale: float = 0.05) -> ObservationSpec:
    """The proprioceptive terms alone (no reference): gyro, gravity, joint pos/vel, last action."""
    n = num_joints
    return ObservationSpec((
        ObservationTerm("base_ang_vel", 3, ang_vel_scale),
        ObservationTerm("projected_gravity", 3),
        ObservationTerm("joint_pos", n),
        ObservationTerm("joint_vel", n, joint_vel_scale),
        ObservationTerm("last_action", n),
    ))


def tracking_spec(num_joints: int, frames: Sequence[int] = (1, 2, 3),
                  root_velocity: bool = False) -> ObservationSpec:
    """Robot state plus the reference motion at `frames` control periods ahead; with `root_velocity`
    also the reference root's velocity (`ref_root_lin_vel`), the one term that says where a motion
    travels: the others see the reference's joints, height and relative orientation only."""
    n, f = num_joints, tuple(frames)
    velocity = (ObservationTerm("ref_root_lin_vel", 3 * len(f), 1.0, f),) if root_velocity else ()
    return ObservationSpec(robot_state_spec(n).terms + (
        ObservationTerm("ref_joint_pos", n * len(f), 1.0, f),
        ObservationTerm("ref_joint_vel", n * len(f), 0.05, f),
        ObservationTerm("ref_root_height", len(f), 1.0, f),
        ObservationTerm("ref_root_rot", 6 * len(f), 1.0, f),
    ) + velocity)
