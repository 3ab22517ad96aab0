"""Turn a Choreography into joint angles: upper body from its signals, legs by inverse kinematics."""
from dataclasses import dataclass
from typing import Dict

import numpy as np
from scipy.spatial.transform import Rotation

from bcg.motion import LAFAN1_FPS, ReferenceMotion
from bcg.motion.reference import align_quat_signs, finite_difference

from ..kinematics import RobotKinematics
from .choreography import Choreography


@dataclass(frozen=True)
class SyntheticMotion:
    """A synthesised motion and where its feet are planted."""

    motion: ReferenceMotion
    """At `fps` (LAFAN1's 30 by default), joints in the robot description's order."""
    choreography: Choreography
    """What it was made from; `choreography.planted(side, times)` says when a foot is planted."""


def synthesize(choreography: Choreography, kinematics: RobotKinematics, fps: float = LAFAN1_FPS,
               limit_margin: float = 0.05) -> SyntheticMotion:
    """Sample `choreography` at `fps` and solve both legs' IK so each foot follows its path exactly
    (planted feet flat on the floor, contact spheres touching z = 0).

    Raises ValueError naming the joint and time when any angle comes closer than `limit_margin`
    (rad) to a joint limit: the choreography asks too much of the robot.
    """
    robot = kinematics.robot
    times = np.arange(int(round(choreography.duration_s * fps)) + 1) / fps
    root_pos = choreography.root_pos(times)
    rpy = choreography.root_rpy(times)
    root_quat = align_quat_signs(Rotation.from_euler("ZYX", rpy[:, ::-1]).as_quat(scalar_first=True))
    joint_pos = np.tile(robot.default_q, (len(times), 1))
    for name, signal in choreography.joints.items():
        joint_pos[:, robot.joint_names.index(name)] = signal(times)
    feet = {side: choreography.foot_path(side, times, kinematics.sole_height) for side in kinematics.foot_bodies}
    free = _non_leg_columns(kinematics)
    guess = robot.default_q.copy()
    for i in range(len(times)):
        guess[free] = joint_pos[i, free]
        for side, (pos, yaw, weight) in feet.items():
            heading = Rotation.from_euler("Z", yaw[i]).as_quat(scalar_first=True)
            guess = kinematics.solve_leg(side, root_pos[i], root_quat[i], guess, pos[i], heading)
            if weight[i] > 0:
                guess = _relax_ankle(kinematics, side, root_pos[i], root_quat[i], guess, weight[i])
        joint_pos[i] = guess
    _check_margin(robot, joint_pos, times, limit_margin)
    return SyntheticMotion(ReferenceMotion(fps, robot.joint_names, joint_pos, finite_difference(joint_pos, 1 / fps),
                                           root_pos, root_quat), choreography)


def _relax_ankle(kinematics: RobotKinematics, side: str, root_pos: np.ndarray, root_quat: np.ndarray,
                 q: np.ndarray, weight: float) -> np.ndarray:
    """A swinging foot need not stay level: move the ankle's pitch and roll by `weight` of the way to
    their default angles, then raise the foot (IK) where one of its contact spheres would end up lower
    than the lowest one of the level foot, so relaxing never pushes it into the floor."""
    ankle, body = kinematics.ankle_columns[side], kinematics.foot_bodies[side]
    spheres = list(kinematics.robot.foot_geoms[side])
    lowest = kinematics.set_pose(root_pos, root_quat, q).geom_xpos[spheres, 2].min()
    q = q.copy()
    q[ankle] += weight * (kinematics.robot.default_q[ankle] - q[ankle])
    d = kinematics.set_pose(root_pos, root_quat, q)
    deficit = lowest - d.geom_xpos[spheres, 2].min()
    if deficit <= 0:
        return q
    return kinematics.solve_leg(side, root_pos, root_quat, q, d.xpos[body] + (0.0, 0.0, deficit), d.xquat[body].copy())


def _non_leg_columns(kinematics: RobotKinematics) -> np.ndarray:
    legs = np.concatenate(list(kinematics.leg_columns.values()))
    return np.setdiff1d(np.arange(kinematics.robot.num_joints), legs)


def _check_margin(robot, joint_pos: np.ndarray, times: np.ndarray, margin: float) -> None:
    low = joint_pos - (robot.q_lower + margin)
    high = (robot.q_upper - margin) - joint_pos
    worst: Dict[str, str] = {}
    for col in np.flatnonzero(np.any((low < 0) | (high < 0), axis=0)):
        i = np.argmin(np.minimum(low[:, col], high[:, col]))
        worst[robot.joint_names[col]] = (f"{joint_pos[i, col]:.3f} rad at t = {times[i]:.2f} s "
                                         f"(limits [{robot.q_lower[col]:.3f}, {robot.q_upper[col]:.3f}])")
    if worst:
        raise ValueError(f"synthetic motion within {margin} rad of joint limits: "
                         + "; ".join(f"{k} {v}" for k, v in worst.items()))
