"""Reference motions to measure tracking against: Unitree's retargeted LAFAN1 CSV for the G1."""
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np

from bcg.robot import SDK_JOINT_NAMES

LAFAN_COLUMNS = 7 + len(SDK_JOINT_NAMES)
"""root x y z (m), root quaternion x y z w, then the 29 joint angles (rad) in SDK order."""


class MotionFormatError(ValueError):
    """The motion file is not a LAFAN1-style G1 CSV."""


@dataclass(frozen=True)
class ReferenceMotion:
    """A joint-space reference at a fixed frame rate; arrays have T rows (frames)."""

    fps: float                 # frames/s
    root_pos: np.ndarray       # (T, 3) m, world frame
    root_quat_wxyz: np.ndarray  # (T, 4)
    joint_pos: np.ndarray      # (T, 29) rad, SDK slot order

    @property
    def duration(self) -> float:
        """Time of the last frame, s."""
        return (len(self.joint_pos) - 1) / self.fps

    def joint_pos_at(self, t: float) -> np.ndarray:
        """(29,) rad, joint angles at time `t` (s), linearly interpolated; clamped to the ends."""
        frames = len(self.joint_pos)
        if frames == 1:
            return self.joint_pos[0].copy()
        x = min(max(t * self.fps, 0.0), frames - 1.0)
        i = min(int(x), frames - 2)
        a = x - i
        return (1.0 - a) * self.joint_pos[i] + a * self.joint_pos[i + 1]


def load_lafan_csv(path: Union[str, Path], fps: float = 30.0) -> ReferenceMotion:
    """Read a headerless LAFAN1-style CSV (T x 36, see LAFAN_COLUMNS) recorded at `fps` frames/s."""
    path = Path(path)
    try:
        table = np.loadtxt(path, delimiter=",", ndmin=2)
    except (OSError, ValueError) as e:
        raise MotionFormatError(f"motion file {path}: {e}") from e
    if table.shape[1] != LAFAN_COLUMNS or len(table) == 0:
        raise MotionFormatError(f"motion file {path}: expected rows of {LAFAN_COLUMNS} columns "
                                f"(root xyz, quat xyzw, 29 joints), got shape {table.shape}")
    if not np.all(np.isfinite(table)):
        raise MotionFormatError(f"motion file {path}: non-finite values")
    return ReferenceMotion(fps=float(fps), root_pos=table[:, 0:3], root_quat_wxyz=table[:, [6, 3, 4, 5]],
                           joint_pos=table[:, 7:])
