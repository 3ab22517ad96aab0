"""Velocity spikes from retargeting: joint angles that jump between consecutive frames.

Retargeted motion capture sometimes holds a joint at a wrong angle for a frame or two (an inverse
kinematics branch flip, a wrap-around), which shows as a frame-to-frame speed of 100 rad/s or more;
a policy trained on it learns to chase it. A spike here is a pair of consecutive frames (k, k+1)
of one joint whose |q[k+1] - q[k]| * fps exceeds a threshold. Repair replaces, per joint, the
samples around each spike by linear interpolation in time between the nearest samples kept: first
the frames whose speed is over the threshold on both sides (one-frame outliers), then, for a step
that remains, both ends of the step, widening until no speed is over the threshold.
"""
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from .errors import MotionFileError

SPIKE_SPEED = 35.0
"""rad/s: default threshold. Safety checks for the G1 seen in the wild trip at |dq| > 35 rad/s
(docs/G1.md); Unitree's LAFAN1 retargeting peaks at 10-22 rad/s in run, jump and walk."""


@dataclass(frozen=True)
class Spike:
    """One joint moving faster than the threshold between frames `frame` and `frame + 1`."""

    joint: str
    frame: int
    speed: float
    """rad/s, signed (q[frame + 1] - q[frame]) * fps."""


def find_spikes(joint_pos: np.ndarray, fps: float, joint_names: Sequence[str],
                threshold: float = SPIKE_SPEED) -> List[Spike]:
    """Every spike of joint_pos (T, n) rad sampled at fps, ordered by frame then joint."""
    speed = np.diff(np.asarray(joint_pos, float), axis=0) * fps
    return [Spike(joint_names[j], int(k), float(speed[k, j])) for k, j in np.argwhere(np.abs(speed) > threshold)]


def remove_spikes(joint_pos: np.ndarray, fps: float, joint_names: Sequence[str],
                  threshold: float = SPIKE_SPEED) -> Tuple[np.ndarray, np.ndarray]:
    """joint_pos (T, n) rad at fps, columns `joint_names`, with the samples around spikes replaced
    (module docstring).

    Returns (repaired (T, n) rad, replaced (T, n) bool). MotionFileError when a joint's spikes cannot
    be repaired (fewer than two samples left to interpolate between).
    """
    q = np.array(joint_pos, float)
    replaced = np.zeros(q.shape, bool)
    times = np.arange(len(q)) / fps
    for j in range(q.shape[1]):
        original = q[:, j].copy()
        while True:
            over = np.flatnonzero(np.abs(np.diff(q[:, j])) * fps > threshold)
            if not over.size:
                break
            kept = np.flatnonzero(~replaced[:, j])
            outliers = np.intersect1d(over[1:][np.diff(over) == 1], kept)   # frames with both sides over
            if outliers.size:
                replaced[outliers, j] = True
            else:   # steps: give up the nearest kept sample on each side of each
                for k in over:
                    left, right = kept[kept <= k], kept[kept > k]
                    replaced[left[-1:], j] = True
                    replaced[right[:1], j] = True
            kept = ~replaced[:, j]
            if kept.sum() < 2:
                raise MotionFileError(f"{joint_names[j]}: speeds above {threshold:g} rad/s everywhere; nothing "
                                      "left to interpolate from")
            q[:, j] = np.where(kept, original, np.interp(times, times[kept], original[kept]))
    return q, replaced
