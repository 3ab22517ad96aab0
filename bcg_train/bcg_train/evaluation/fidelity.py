"""Sim-to-sim fidelity: MuJoCo and the training simulator from the same initial state under the same
control, and how far apart they drift, quantity by quantity, over time.

Two kinds of control:
- open loop (`open_loop`): both plants track the reference's joint angles with the same PD gains from
  the reference's first frame; nothing feeds back, so the gap is the physics alone;
- closed loop (`rollout.run_policy(..., record=True)`): a policy on each plant's own state.
`divergence` compares two traces per control step: pelvis height [m], pelvis orientation (angle
between the two orientations) [rad], joint angles (mean |difference|) [rad], foot heights (lowest
sphere of each foot, mean |difference| over the feet) [m] and foot normal forces (mean |difference|
over the feet) [N]. A trace ends where its plant fell (root below the fall height) or diverged.
"""
from dataclasses import dataclass
from typing import Dict, List, Sequence

import numpy as np

from bcg.robot import FALL_HEIGHT
from bcg_train.diffsim import NonFiniteStateError
from bcg_train.motion.clip import MotionClip

from .plants import PlantState

QUANTITIES = {"pelvis_height": "m", "pelvis_orientation": "rad", "joint_angles": "rad", "foot_height": "m",
              "foot_force": "N"}
"""What `divergence` reports, with units."""


@dataclass
class Trace:
    """One plant's states after each control step (T steps, n joints, robot description order)."""

    period_s: float
    root_height: np.ndarray     # (T,) m
    base_quat: np.ndarray       # (T, 4) w x y z
    joint_pos: np.ndarray       # (T, n) rad
    foot_height: np.ndarray     # (T, 2) m
    foot_force: np.ndarray      # (T, 2) N

    @classmethod
    def of(cls, states: Sequence[PlantState], period_s: float) -> "Trace":
        return cls(period_s, np.array([s.root_height for s in states]), np.array([s.base_quat for s in states]),
                   np.array([s.joint_pos for s in states]), np.array([s.foot_height for s in states]),
                   np.array([s.foot_force for s in states]))

    @property
    def steps(self) -> int:
        return len(self.root_height)

    @property
    def time(self) -> np.ndarray:
        """(T,) s, the end of each control step."""
        return (np.arange(self.steps) + 1) * self.period_s


def open_loop(plant, clip: MotionClip, kp: np.ndarray, kd: np.ndarray, duration_s: float,
              fall_height: float = FALL_HEIGHT) -> Trace:
    """`plant` (MujocoPlant or WarpPlant) from the reference's first frame, PD (kp, kd (n,)) on the
    reference's joint angles of the next frame at every control step of the clip, for `duration_s`."""
    robot = plant.robot
    q_ref, qd_ref = clip.generalized()
    period = 1.0 / clip.fps
    plant.reset(q_ref[0], qd_ref[0])
    states: List[PlantState] = []
    for t in range(min(int(round(duration_s / period)), clip.num_frames - 1)):
        target = np.clip(clip.joint_pos[t + 1], robot.q_lower, robot.q_upper)
        try:
            plant.advance(target, kp, kd, period)
        except NonFiniteStateError:
            break
        states.append(plant.state())
        if states[-1].root_height < fall_height:
            break
    return Trace.of(states, period)


def _orientation_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(T,) rad between unit quaternions a, b (T, 4)."""
    dot = np.abs(np.sum(a * b, axis=-1))
    return 2.0 * np.arccos(np.clip(dot, 0.0, 1.0))


def divergence(a: Trace, b: Trace) -> Dict[str, np.ndarray]:
    """Per-step |a - b| of each quantity in QUANTITIES, over the steps both traces have."""
    n = min(a.steps, b.steps)
    return {"pelvis_height": np.abs(a.root_height[:n] - b.root_height[:n]),
            "pelvis_orientation": _orientation_angle(a.base_quat[:n], b.base_quat[:n]),
            "joint_angles": np.abs(a.joint_pos[:n] - b.joint_pos[:n]).mean(axis=1),
            "foot_height": np.abs(a.foot_height[:n] - b.foot_height[:n]).mean(axis=1),
            "foot_force": np.abs(a.foot_force[:n] - b.foot_force[:n]).mean(axis=1)}


def at_times(div: Dict[str, np.ndarray], period_s: float, times_s: Sequence[float]) -> Dict[str, List[float]]:
    """Each quantity's divergence averaged over the control steps up to each of `times_s` (NaN past
    the shorter trace's end)."""
    out = {}
    for name, values in div.items():
        row = []
        for t in times_s:
            k = int(round(t / period_s))
            row.append(float(values[:k].mean()) if 0 < k <= len(values) else float("nan"))
        out[name] = row
    return out
