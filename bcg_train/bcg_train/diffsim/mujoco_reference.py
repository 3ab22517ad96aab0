"""Comparisons of the simulator with MuJoCo on the same XML, shared by the tests and by
bench/validate_diffsim.py (which adds the report, tables and plots).

(a) No contact: the robot in the air (pelvis at 6.5 m, the feet never reach the ground within the
    run), MuJoCo's Euler integrator at the simulator's step h, contact disabled; small joint
    torques 0.01 x limit x cos(2 pi f t) (cosine: no velocity drift, so no joint reaches its
    limit) from random initial velocities (std 0.1). Friction loss off in both (MuJoCo:
    disableflags; simulator: frictionloss_scale = 0), or on in both (MuJoCo: a constraint;
    simulator: a smooth -F tanh(qd / v), so they differ).
(b) Drop test: the stand policy's PD gains (`bcg.contract.builtin.stand_gains`) holding the default
    pose, pelvis released with the feet above the ground; MuJoCo at 1 kHz (the PD as a servo actuator, i.e.
    explicit PD clamped to the torque limit each step), the simulator at dt 0.02 s with its
    substeps. Base height and foot penetration over time. MuJoCo penetration: mean / max of -dist
    over foot-sphere/floor contacts. Simulator: mean / max of max(-height, 0) over spheres carrying
    impulse (normal impulse > IMPULSE_FRACTION x the per-sphere share of the weight impulse m g h),
    and their mean signed height.
"""
from dataclasses import dataclass
from typing import List, Optional

import mujoco
import numpy as np

from bcg.contract.builtin import stand_gains

from .config import SimConfig
from .model import Model
from .simulator import Simulator

AIR_HEIGHT = 6.5            # m, pelvis start of the no-contact runs
DROP_CLEARANCES = (0.005, 0.030)   # m, the drop tests: feet this far above the ground at release
TORQUE_FRACTION = 0.01      # joint torque amplitude as a fraction of the torque limit
VELOCITY_STD = 0.1          # std of the random initial velocities (rad/s, m/s)
MUJOCO_DROP_STEP = 0.001    # s
CONTROL_DT = 0.02           # s, simulator step of the drop test (4 substeps)
IMPULSE_FRACTION = 1e-3     # 'carrying impulse': normal impulse above this share of m g h / nc


def mujoco_model(robot, timestep: float, contact: bool = True, frictionloss: bool = True,
                 kp: Optional[np.ndarray] = None, kd: Optional[np.ndarray] = None) -> mujoco.MjModel:
    """The robot's MjModel with the Euler integrator at `timestep` s. With kp, kd (num_joints,), the
    motors become PD servos: ctrl = joint target [rad], force kp (ctrl - q) - kd qd clamped to the
    torque limit, computed explicitly every step (the same as explicit PD written to ctrl)."""
    m = mujoco.MjModel.from_xml_path(str(robot.model_path))
    m.opt.timestep = timestep
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    if not contact:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    if not frictionloss:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS
    if kp is not None:
        a = robot.actuator_ids
        m.actuator_gaintype[a] = mujoco.mjtGain.mjGAIN_FIXED
        m.actuator_biastype[a] = mujoco.mjtBias.mjBIAS_AFFINE
        m.actuator_gainprm[a, 0] = kp
        m.actuator_biasprm[a, :3] = np.stack([np.zeros_like(kp), -kp, -kd], axis=1)
        m.actuator_ctrllimited[a] = 0
        m.actuator_forcelimited[a] = 1
        m.actuator_forcerange[a] = np.stack([-robot.tau_limit, robot.tau_limit], axis=1)
    return m


def set_mujoco_state(model: Model, d: mujoco.MjData, q: np.ndarray, qd: np.ndarray) -> None:
    """Write simulator coordinates q (nq,), qd (nv,) into MjData (MuJoCo layout via model.mj_*_adr)."""
    d.qpos[model.mj_qpos_adr] = q
    d.qvel[model.mj_dof_adr] = qd


def torque_profile(robot, seed: int = 0):
    """tau(t) (num_joints,) [N m]: TORQUE_FRACTION x limit x cos(2 pi f t), f ~ U(3, 6) Hz per joint."""
    freq = np.random.default_rng(seed).uniform(3.0, 6.0, robot.num_joints)
    return lambda t: TORQUE_FRACTION * robot.tau_limit * np.cos(2.0 * np.pi * freq * t)


@dataclass
class AirResult:
    """No-contact comparison over one run."""

    frictionloss: bool
    max_joint_error: float          # rad, max over time and joints
    max_base_error: float           # m, max over time and axes
    min_limit_margin: float         # rad, closest any joint came to its range in MuJoCo (>0: never at a limit)
    time: np.ndarray                # (T,) s
    joint_error: np.ndarray         # (T,) rad, max over joints at each step


def no_contact_agreement(frictionloss: bool, duration: float = 1.0, h: float = 0.005, seed: int = 0,
                         model_path=None) -> AirResult:
    """Same torques, same initial state, MuJoCo Euler at h vs the simulator with one substep of h."""
    config = SimConfig(frictionloss_scale=1.0 if frictionloss else 0.0, substeps=1)
    model = Model.from_mujoco(model_path, device="cpu")
    robot = model.robot
    m = mujoco_model(robot, h, contact=False, frictionloss=frictionloss)
    d = mujoco.MjData(m)
    q0 = model.default_qpos(AIR_HEIGHT)
    qd0 = np.random.default_rng(seed).normal(0.0, VELOCITY_STD, model.nv)
    set_mujoco_state(model, d, q0, qd0)
    sim = Simulator(model, 1, config)
    s0, s1 = sim.state(), sim.state()
    s0.assign(q0, qd0)
    ctrl = sim.control()
    tau = torque_profile(robot, seed)
    lower, upper = robot.q_lower, robot.q_upper
    hinge_adr = model.mj_qpos_adr[7:]
    jq = robot.joint_qpos_adr
    steps = int(round(duration / h))
    t = np.arange(1, steps + 1) * h
    joint_err, base_err, margin = np.zeros(steps), np.zeros(steps), np.inf
    for k in range(steps):
        u = tau(k * h)
        d.ctrl[robot.actuator_ids] = u
        mujoco.mj_step(m, d)
        ctrl.set_pd(tau=u)
        sim.step(s0, s1, ctrl, h)
        s0, s1 = s1, s0
        q = s0.q.numpy()[0]
        joint_err[k] = np.abs(q[7:] - d.qpos[hinge_adr]).max()
        base_err[k] = np.abs(q[:3] - d.qpos[model.mj_qpos_adr[:3]]).max()
        margin = min(margin, np.min(np.minimum(d.qpos[jq] - lower, upper - d.qpos[jq])))
    return AirResult(frictionloss, float(joint_err.max()), float(base_err.max()), float(margin), t, joint_err)


@dataclass
class DropTrace:
    """Time series of one drop run, sampled every CONTROL_DT (index 0 = after the first step)."""

    label: str
    time: np.ndarray                # (T,) s
    base_height: np.ndarray         # (T,) m, pelvis z
    penetration_mean: np.ndarray    # (T,) m, mean over contacting spheres (0 when none)
    penetration_max: np.ndarray     # (T,) m
    contact_height: np.ndarray      # (T,) m, mean signed height of contacting spheres (NaN when none)
    num_contacts: np.ndarray        # (T,) int

    def settled(self, values: np.ndarray) -> float:
        """Mean of `values` over the second half of the run (after touchdown and settling)."""
        return float(np.nanmean(values[len(values) // 2:]))


def _summarise(heights: np.ndarray):
    """(mean penetration, max penetration, mean signed height) over the given contact heights [m]."""
    if heights.size == 0:
        return 0.0, 0.0, np.nan
    pen = np.maximum(-heights, 0.0)
    return float(pen.mean()), float(pen.max()), float(heights.mean())


def drop_height(model: Model, clearance: float) -> float:
    """Pelvis height [m] that releases the default pose with its feet `clearance` m above the ground."""
    return model.robot.standing_height + clearance


def mujoco_drop(duration: float, model: Model, clearance: float = DROP_CLEARANCES[0]) -> DropTrace:
    """MuJoCo at MUJOCO_DROP_STEP with the stand policy's PD gains as a servo, the feet released
    `clearance` m above the ground, sampled every CONTROL_DT."""
    robot = model.robot
    kp, kd = stand_gains(robot)
    m = mujoco_model(robot, MUJOCO_DROP_STEP, kp=kp, kd=kd)
    d = mujoco.MjData(m)
    set_mujoco_state(model, d, model.default_qpos(drop_height(model, clearance)), np.zeros(model.nv))
    d.ctrl[robot.actuator_ids] = robot.default_q
    floor = {g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE}
    feet = {g for side in robot.foot_geoms.values() for g in side}
    per_sample = int(round(CONTROL_DT / MUJOCO_DROP_STEP))
    samples = int(round(duration / CONTROL_DT))
    rows = []
    for _ in range(samples):
        for _ in range(per_sample):
            mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)   # contacts of the current state (mj_step's are from before the step)
        c = d.contact[:d.ncon]
        mask = np.array([(a in feet and b in floor) or (b in feet and a in floor) for a, b in c.geom], dtype=bool)
        dist = np.asarray(c.dist)[mask] if d.ncon else np.zeros(0)
        rows.append((d.qpos[model.mj_qpos_adr[2]],) + _summarise(dist) + (dist.size,))
    return _trace("MuJoCo", rows)


def _trace(label: str, rows: List[tuple]) -> DropTrace:
    a = np.array(rows, dtype=float)
    return DropTrace(label, np.arange(1, len(rows) + 1) * CONTROL_DT, a[:, 0], a[:, 1], a[:, 2], a[:, 3],
                     a[:, 4].astype(int))


def warp_drop(config: SimConfig, duration: float, model: Model, clearance: float = DROP_CLEARANCES[0]) -> DropTrace:
    """The simulator with `config` at CONTROL_DT, the stand policy's PD gains, the feet released
    `clearance` m above the ground."""
    robot = model.robot
    kp, kd = stand_gains(robot)
    sim = Simulator(model, 1, config)
    s0, s1 = sim.state(), sim.state()
    s0.assign(model.default_qpos(drop_height(model, clearance)), np.zeros(model.nv))
    ctrl = sim.control().set_pd(q_target=robot.default_q, kp=kp, kd=kd)
    h = CONTROL_DT / config.substeps
    threshold = IMPULSE_FRACTION * robot_mass(model) * np.linalg.norm(model.gravity) * h / model.nc
    rows = []
    for _ in range(int(round(duration / CONTROL_DT))):
        sim.step(s0, s1, ctrl, CONTROL_DT)
        s0, s1 = s1, s0
        height = s0.contact_height.numpy()[0]
        carrying = s0.contact_impulse.numpy()[0, :, 0] > threshold
        rows.append((s0.q.numpy()[0, 2],) + _summarise(height[carrying]) + (int(carrying.sum()),))
    return _trace(f"Warp kappa {config.kappa:g}", rows)


def robot_mass(model: Model) -> float:
    """Total mass [kg] of the simulated robot tree."""
    return float(model.body_mass.numpy().sum())
