"""One evaluation run of an exported policy in a plant, with the paper's per-run numbers.

The policy runs exactly as on the robot: observation from the ONNX file's own contract (the same
`bcg.contract` code the policy node runs), targets `default + action_scale * action` clipped to the
joint limits, the contract's gains. It starts on the reference's first frame, or the one `start_s`
into it (joint angles plus N(0, noise^2) per seed, the reference's velocities), or with `from_rest`
standing still there as the policy node starts the robot (`MotionClip.rest_state`: the default pose,
facing the frame's heading, the same joint noise), and tracks the reference from there; times are
counted from the start.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from bcg.contract import ObservationInputs, Policy
from bcg.robot import FALL_HEIGHT
from bcg_train.diffsim import NonFiniteStateError
from bcg_train.motion.body_error import mean_body_error
from bcg_train.motion.clip import MotionClip, reference_frames

from .plants import PlantState


@dataclass
class RunResult:
    """One run."""

    fell: bool
    """Root below `fall_height` at some control step."""
    fall_time_s: Optional[float]
    """When it first did [s], None if never."""
    duration_s: float
    """Simulated time [s] (up to the fall)."""
    contact_height_mm: float
    """Mean signed height of the foot spheres in contact [mm] (negative: penetrating); NaN without contact."""
    tracking_error_cm: float
    """Mean over control steps and bodies of the body position error to the reference [cm]."""
    tracking_error_root_xy_cm: float
    """The same with each pose's horizontal root position removed [cm]: posture, height and heading
    count, the drift over the floor does not (a policy that walks a little slower than its reference
    is far off in the world frame and close here)."""
    self_contact_s: float = 0.0
    """Time [s] with two of the robot's bodies touching (the legs, in a crossing step: MuJoCo collides
    them, the training simulator does not, so 0 there)."""
    first_self_contact_s: Optional[float] = None
    """When they first did [s], None if never."""
    final_root_offset_m: float = float("nan")
    """Horizontal distance of the root from the reference's at the run's last control step [m]: whether
    a travelling robot went where its reference went (NaN when no step ran)."""


def run_policy(plant, policy: Policy, clip: MotionClip, seed: int, duration_s: float, noise_rad: float = 0.02,
               fall_height: float = FALL_HEIGHT, record: Optional[List[PlantState]] = None,
               start_s: float = 0.0, from_rest: bool = False, hold_s: float = 0.0) -> RunResult:
    """Run `policy` in `plant` (MujocoPlant or WarpPlant) along `clip` (at the policy's rate) from
    `start_s` [s] into it; the state after each control step is appended to `record` when given.
    `hold_s` [s] (from rest only, rounded to control periods): first stand that long in the default
    pose under the policy's gains, unsupported; the policy and the reference start after it.
    ValueError when `start_s` leaves no control step of the clip, or on a hold without `from_rest`."""
    contract = policy.contract
    robot = plant.robot
    order = np.array([robot.joint_names.index(j) for j in contract.joint_names])   # policy -> robot joints
    n = robot.num_joints
    kp, kd = np.empty(n), np.empty(n)
    kp[order], kd[order] = contract.kp, contract.kd
    first = int(round(start_s / contract.control_period_s))
    if not 0 <= first < clip.num_frames - 1:
        raise ValueError(f"start {start_s:g} s: outside the motion's {clip.duration_s:.2f} s")
    if hold_s and not from_rest:
        raise ValueError("a hold (hold_s) starts from rest: from_rest=True")
    if from_rest:
        q0, qd0 = clip.rest_state(first, robot.default_q, robot.standing_height)
    else:
        q_ref, qd_ref = clip.generalized()
        q0, qd0 = q_ref[first].copy(), qd_ref[first]
    q0[7:] += np.random.default_rng(seed).normal(0.0, noise_rad, n)
    plant.reset(q0, qd0)
    for _ in range(int(round(hold_s / contract.control_period_s))):
        plant.advance(np.clip(robot.default_q, robot.q_lower, robot.q_upper), kp, kd, contract.control_period_s)
    frames = np.asarray(contract.observation.frames or (0,), dtype=int)
    steps = min(int(round(duration_s / contract.control_period_s)), clip.num_frames - 1 - first)
    last = np.zeros(n, np.float32)
    heights, errors = [], []
    fall_time = None
    touching = []
    st = plant.state()
    for t in range(steps):
        future = np.minimum(first + t + frames, clip.num_frames - 1)
        reference = reference_frames(clip, future, order)
        obs = contract.observation.build(ObservationInputs(
            base_quat=st.base_quat, base_ang_vel=st.base_ang_vel, joint_pos=st.joint_pos[order],
            joint_vel=st.joint_vel[order], last_action=last, default_joint_pos=contract.default_joint_pos,
            reference=reference))
        last = policy(obs)
        target = np.empty(n)
        target[order] = contract.default_joint_pos + contract.action_scale * last
        try:
            plant.advance(np.clip(target, robot.q_lower, robot.q_upper), kp, kd, contract.control_period_s)
        except NonFiniteStateError:             # the simulation diverged: a fall, as on the robot
            fall_time = (t + 1) * contract.control_period_s
            break
        st = plant.state()
        if record is not None:
            record.append(st)
        heights.extend(st.contact_height)
        touching.append(st.self_contacts > 0)
        errors.append(body_errors(st.body_pos, clip.body_pos[first + t + 1]))
        if st.root_height < fall_height:
            fall_time = (t + 1) * contract.control_period_s
            break
    offset = float(np.linalg.norm(st.body_pos[0, :2] - clip.body_pos[first + len(errors), 0, :2])) if errors \
        else float("nan")
    return RunResult(fell=fall_time is not None, fall_time_s=fall_time, final_root_offset_m=offset,
                     duration_s=len(errors) * contract.control_period_s,
                     contact_height_mm=float(np.mean(heights) * 1000.0) if heights else float("nan"),
                     tracking_error_cm=_mean_cm(errors, 0), tracking_error_root_xy_cm=_mean_cm(errors, 1),
                     self_contact_s=sum(touching) * contract.control_period_s,
                     first_self_contact_s=(touching.index(True) + 1) * contract.control_period_s if any(touching)
                     else None)


def body_errors(body_pos: np.ndarray, ref_body_pos: np.ndarray) -> np.ndarray:
    """(2,) m: `mean_body_error` between two poses (B, 3) (root first), in the world frame and with
    each pose's horizontal root position removed."""
    return np.array([mean_body_error(body_pos, ref_body_pos, without_drift) for without_drift in (False, True)])


def _mean_cm(errors: List[np.ndarray], column: int) -> float:
    return float(np.mean([e[column] for e in errors]) * 100.0) if errors else float("nan")
