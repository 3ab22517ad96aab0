"""How far the robot is from a start from rest when the policy first sees it.

The policies are trained with some episodes starting from rest: the default joint pose, no
velocity, upright (or leaning a few degrees), last action zero, at the reference's first frame
(`bcg_train`'s `env.rest_start_*`). The node's hand-over (RAMP, HOLD, BLEND) is meant to give the
policy exactly that as its first observation; `rest_deviation` measures how close it came, and the
node reports it (its stop summary, the event log, mujoco_check's verdict).
"""
import numpy as np

from .safety import projected_gravity_z


def rest_deviation(state: np.void, slots: np.ndarray, default_q: np.ndarray) -> dict:
    """{'joint_pos_rad': max |q - default| over the policy joints, 'joint_vel_rad_s': max |dq|,
    'tilt_deg': the base's angle from upright, 'base_rate_rad_s': |gyroscope|} of LowState `state`;
    `slots` (n,) the policy joints' SDK slots, `default_q` (n,) rad their default pose."""
    motors, imu = state["motor_state"], state["imu_state"]
    q, dq = motors["q"][slots].astype(float), motors["dq"][slots].astype(float)
    gz = projected_gravity_z(imu["quaternion"])
    return {"joint_pos_rad": round(float(np.abs(q - default_q).max()), 4),
            "joint_vel_rad_s": round(float(np.abs(dq).max()), 4),
            "tilt_deg": round(float(np.degrees(np.arccos(np.clip(-gz, -1.0, 1.0)))), 3),
            "base_rate_rad_s": round(float(np.linalg.norm(imu["gyroscope"].astype(float))), 4)}
