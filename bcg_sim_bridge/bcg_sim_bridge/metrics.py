"""Evaluation of a run: fall, foot penetration, joint tracking; written as JSON atomically."""
import json
from pathlib import Path
from typing import Any, Dict, Optional, Union

import mujoco
import numpy as np

from bcg.atomic_file import write_text_atomic
from bcg.motion import ReferenceMotion
from bcg.mujoco_plant import FootContacts, self_contacts
from bcg.robot import RobotDescription


class RunMetrics:
    """Accumulates samples of the simulated robot (call `sample` at the state rate): fall, foot
    penetration, the robot touching itself (two of its bodies in contact), joint tracking."""

    def __init__(self, model: mujoco.MjModel, robot: RobotDescription, fall_height: float,
                 motion: Optional[ReferenceMotion] = None, motion_start: float = 0.0):
        """`motion_start`: simulated time [s] of the motion's first frame (tracking is measured from then)."""
        self.robot = robot
        self.motion_start = float(motion_start)
        self.fall_height = float(fall_height)
        self.fall_time: Optional[float] = None
        self.min_root_height = np.inf
        self._feet = FootContacts(model, robot)
        self._model = model
        self.self_contact_samples = 0
        self.first_self_contact: Optional[float] = None
        self._root_qadr = int(model.jnt_qposadr[model.body_jntadr[robot.root_body]])
        self._qadr = robot.joint_qpos_adr
        self.contacts = 0
        self._penetration_sum = 0.0
        self.max_penetration = 0.0
        self.motion = motion
        self._motion_cols = None if motion is None else motion.joint_index(robot.joint_names)
        self._tracking_samples = 0
        self._sq_err = np.zeros(robot.num_joints)
        self._abs_err = np.zeros(robot.num_joints)
        self.samples = 0

    def sample(self, data: mujoco.MjData) -> None:
        """Record the state in `data` (its contacts are those of the last step)."""
        self.samples += 1
        t = float(data.time)
        height = float(data.qpos[self._root_qadr + 2])
        self.min_root_height = min(self.min_root_height, height)
        if self.fall_time is None and height < self.fall_height:
            self.fall_time = t
        if self_contacts(self._model, data):
            self.self_contact_samples += 1
            if self.first_self_contact is None:
                self.first_self_contact = t
        dist = self._feet.distances(data)
        if dist.size:
            depth = np.maximum(-dist, 0.0)
            self.contacts += len(depth)
            self._penetration_sum += float(depth.sum())
            self.max_penetration = max(self.max_penetration, float(depth.max()))
        t_motion = t - self.motion_start
        if self.motion is not None and 0.0 <= t_motion <= self.motion.duration_s:
            err = data.qpos[self._qadr] - self.motion.sample(np.array([t_motion]), self._motion_cols).joint_pos[0]
            self._sq_err += err * err
            self._abs_err += np.abs(err)
            self._tracking_samples += 1

    def report(self) -> Dict[str, Any]:
        """JSON-ready summary: lengths in m, angles in rad."""
        out: Dict[str, Any] = {
            "fell": self.fall_time is not None,
            "fall_time_s": self.fall_time,
            "fall_height_m": self.fall_height,
            "min_root_height_m": None if self.samples == 0 else self.min_root_height,
            "foot_contacts": self.contacts,
            "foot_penetration_mean_m": self._penetration_sum / self.contacts if self.contacts else 0.0,
            "foot_penetration_max_m": self.max_penetration,
            "samples": self.samples,
            "self_contact_fraction": self.self_contact_samples / self.samples if self.samples else 0.0,
            "first_self_contact_s": self.first_self_contact,
        }
        if self.motion is not None:
            k = max(self._tracking_samples, 1)
            rms = np.sqrt(self._sq_err / k)
            out["tracking"] = {
                "samples": self._tracking_samples,
                "joint_rms_error_rad": dict(zip(self.robot.joint_names, rms.tolist())),
                "joint_mean_abs_error_rad": dict(zip(self.robot.joint_names, (self._abs_err / k).tolist())),
                "mean_rms_error_rad": float(rms.mean()),
            }
        return out


def write_json_atomic(path: Union[str, Path], payload: Dict[str, Any]) -> None:
    """Write `payload` as JSON to `path` atomically (bcg.atomic_file)."""
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")
