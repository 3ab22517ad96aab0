"""Forward kinematics and leg inverse kinematics on the robot's own MuJoCo model.

The model is the file the robot description was read from, so reference body positions, foot
heights and the simulator all share one geometry. Conventions: positions in metres in the world
frame, quaternions (w, x, y, z), joint arrays in the description's joint order.
"""
from typing import Dict, Tuple

import mujoco
import numpy as np

from bcg.robot import RobotDescription


class IKError(RuntimeError):
    """A leg's inverse kinematics did not converge (target out of reach)."""


class RobotKinematics:
    """FK of every robot body, foot contact-sphere heights and 6-DoF leg IK, frame by frame.

    Not thread-safe (one MjData). `body_names` are the robot's bodies in MuJoCo order, root first.
    """

    def __init__(self, robot: RobotDescription):
        self.robot = robot
        self.model = mujoco.MjModel.from_xml_path(str(robot.model_path))
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.body_ids = np.array([b for b in range(1, m.nbody) if m.body_rootid[b] == robot.root_body])
        self.body_names: Tuple[str, ...] = tuple(m.body(b).name for b in self.body_ids)
        self._root_qpos = int(m.jnt_qposadr[m.body_jntadr[robot.root_body]])
        self.foot_bodies = {side: int(m.geom_bodyid[geoms[0]]) for side, geoms in robot.foot_geoms.items()}
        self.sole_height = -float(min(m.geom_pos[g, 2] - m.geom_size[g, 0] for g in robot.foot_geoms["left"]))
        """m: height of a foot body's origin above the ground when its contact spheres rest on it, foot flat."""
        self.leg_columns = {side: self._chain_columns(body) for side, body in self.foot_bodies.items()}
        """side -> (6,) columns (description order) of the joints from the root to that foot, hip first."""
        self.ankle_columns = {side: np.array([next(c for c in cols if part in robot.joint_names[c])
                                              for part in ("ankle_pitch", "ankle_roll")])
                              for side, cols in self.leg_columns.items()}
        """side -> columns of the ankle's (pitch, roll) joints."""
        self._leg_joint_ids = {side: np.array([m.joint(robot.joint_names[c]).id for c in cols])
                               for side, cols in self.leg_columns.items()}

    def _chain_columns(self, body: int) -> np.ndarray:
        m, names, cols = self.model, self.robot.joint_names, []
        while body != self.robot.root_body:
            for j in range(m.body_jntadr[body], m.body_jntadr[body] + m.body_jntnum[body]):
                cols.append(names.index(m.joint(j).name))
            body = m.body_parentid[body]
        return np.array(cols[::-1])

    def set_pose(self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray) -> mujoco.MjData:
        """Pose the model (root_pos (3,) m, root_quat (4,) w x y z, joint_pos (n,) rad) and run mj_kinematics."""
        d = self.data
        d.qpos[self._root_qpos:self._root_qpos + 3] = root_pos
        d.qpos[self._root_qpos + 3:self._root_qpos + 7] = root_quat
        d.qpos[self.robot.joint_qpos_adr] = joint_pos
        mujoco.mj_kinematics(self.model, d)
        return d

    def forward(self, root_pos: np.ndarray, root_quat: np.ndarray,
                joint_pos: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Body frames of (T,) poses: root_pos (T, 3), root_quat (T, 4), joint_pos (T, n) ->
        body_pos (T, B, 3) m and body_quat (T, B, 4) (w x y z) of `body_names`, world frame."""
        frames = len(joint_pos)
        pos = np.empty((frames, len(self.body_ids), 3))
        quat = np.empty((frames, len(self.body_ids), 4))
        for i in range(frames):
            d = self.set_pose(root_pos[i], root_quat[i], joint_pos[i])
            pos[i] = d.xpos[self.body_ids]
            quat[i] = d.xquat[self.body_ids]
        return pos, quat

    def foot_sphere_heights(self, root_pos: np.ndarray, root_quat: np.ndarray,
                            joint_pos: np.ndarray) -> Dict[str, np.ndarray]:
        """side -> (T, S) m, height above z = 0 of the lowest point of each of the foot's contact spheres."""
        geoms = self.robot.foot_geoms
        out = {side: np.empty((len(joint_pos), len(g))) for side, g in geoms.items()}
        radius = {side: self.model.geom_size[list(g), 0] for side, g in geoms.items()}
        for i in range(len(joint_pos)):
            d = self.set_pose(root_pos[i], root_quat[i], joint_pos[i])
            for side, g in geoms.items():
                out[side][i] = d.geom_xpos[list(g), 2] - radius[side]
        return out

    def solve_leg(self, side: str, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
                  foot_pos: np.ndarray, foot_quat: np.ndarray, tolerance: float = 1e-9,
                  max_iterations: int = 30) -> np.ndarray:
        """joint_pos (n,) with the `side` leg's 6 joints set so its foot body's origin is at foot_pos (3,)
        m with orientation foot_quat (4,) (w x y z), starting from joint_pos (Newton steps on the
        6x6 geometric Jacobian). Raises IKError when the pose error stays above `tolerance` (m, rad)."""
        q = np.array(joint_pos, float)
        cols, jids, body = self.leg_columns[side], self._leg_joint_ids[side], self.foot_bodies[side]
        error, rotation_error = np.inf, np.zeros(3)
        for _ in range(max_iterations):
            d = self.set_pose(root_pos, root_quat, q)
            p = d.xpos[body]
            mujoco.mju_subQuat(rotation_error, foot_quat, d.xquat[body])   # in the foot's frame
            e = np.concatenate([foot_pos - p, d.xmat[body].reshape(3, 3) @ rotation_error])
            error = np.abs(e).max()
            if error < tolerance:
                return q
            a, r = d.xaxis[jids].T, (p - d.xanchor[jids]).T
            jac = np.stack([a[1] * r[2] - a[2] * r[1], a[2] * r[0] - a[0] * r[2], a[0] * r[1] - a[1] * r[0],
                            a[0], a[1], a[2]])   # (6, 6): rows linear, angular; columns the leg's hinges
            step = np.linalg.solve(jac.T @ jac + 1e-10 * np.eye(6), jac.T @ e)
            q[cols] += step * min(1.0, 0.5 / max(np.abs(step).max(), 1e-12))
        raise IKError(f"{side} leg IK: foot pose error {error:.3g} after {max_iterations} iterations "
                      f"(target {np.round(foot_pos, 4)} m, root {np.round(root_pos, 4)} m)")
