"""The node's PD gains against the control path its commands meet (`bcg.robot.pd_stability.PdPath`,
declared by `pd_step` / `pd_delay_steps`): its damping gain capped per joint where that path needs
it, a warning at start when the hold gains or the policy's own would not be stable there, and one
when the LowStates show a simulator stepping slower than declared."""
from typing import Optional, Tuple

import numpy as np

from bcg.contract import stand_gains
from bcg.robot.pd_stability import GAIN_MARGIN, PdPath, gain_margin, max_stable_kd

PATH_SETTINGS = "pd_step / pd_delay_steps"
"""The parameters that declare the path (named in the notes)."""


def damping_gains(robot, requested_kd: float, path: PdPath) -> Tuple[np.ndarray, Optional[str]]:
    """((num_joints,) N m s/rad: `requested_kd`, capped per joint at `max_stable_kd` on `path`; a note
    naming the capped joints, or None when none is)."""
    kd = np.minimum(float(requested_kd), max_stable_kd(robot.joint_inertia, path))
    capped = np.flatnonzero(kd < requested_kd)
    if not capped.size:
        return kd, None
    return kd, (f"damping kd {requested_kd:g} capped on {capped.size} joint(s) to stay stable under {path} "
                f"({PATH_SETTINGS}): " + ", ".join(f"{robot.joint_names[j]} {kd[j]:.2f}" for j in capped))


def gain_warning(whose: str, robot, names, kp, kd, path: PdPath) -> Optional[str]:
    """A warning naming the joints `names` whose gains `kp`, `kd` (each (len(names),)) are not stable
    with GAIN_MARGIN on `path`, or None. `whose`: 'the policy's', 'the hold'."""
    joints = [robot.joint_names.index(name) for name in names]
    margin = gain_margin(kp, kd, robot.joint_inertia[joints], path)
    weak = np.flatnonzero(margin < GAIN_MARGIN)
    if not weak.size:
        return None
    state = "unstable" if margin.min() < 1.0 else "barely stable"
    listed = ", ".join(f"{names[j]} (kp {kp[j]:.4g}, kd {kd[j]:.3g}, margin {margin[j]:.2f})"
                       for j in weak[np.argsort(margin[weak])])
    return (f"{whose} gains are {state} under {path} ({PATH_SETTINGS}: what its commands meet), "
            f"stable meaning {GAIN_MARGIN:g} x the gains would still be: {listed}. Expect shaking and |dq| "
            "faults (README: against Unitree's MuJoCo simulator)")


def policy_gain_warning(contract, robot, path: PdPath) -> Optional[str]:
    """`gain_warning` for the contract's gains (its joints must be the robot's: JointMap checks that first)."""
    return gain_warning("the policy's", robot, contract.joint_names, contract.kp, contract.kd, path)


def hold_gain_warning(robot, path: PdPath) -> Optional[str]:
    """`gain_warning` for the gains RAMP and HOLD use (`stand_gains`: the stand policy's)."""
    kp, kd = stand_gains(robot)
    return gain_warning("the hold (RAMP / HOLD: the stand policy's)", robot, robot.joint_names, kp, kd, path)


STEP_TOLERANCE = 1.5
"""A LowState interval this many times pd_step or more says the declared step is not the simulator's
(the interval is measured on the wall clock: a simulator a little slower than real time stays below)."""


def pd_step_warning(state_interval_s: float, robot, path: PdPath) -> Optional[str]:
    """A warning when LowState comes every `state_interval_s` (s, measured) and that is longer than
    the declared PD step of a path with delay (`pd_delay_steps` > 0: a simulator that computes PD once
    per LowState, from the sensors it published, such as Unitree's with its SIMULATE_DT); None otherwise.
    The robot (delay 0) runs its PD faster than it reports, so the check does not apply to it."""
    if path.delay_steps == 0 or state_interval_s < STEP_TOLERANCE * path.step_s:
        return None
    measured = PdPath(state_interval_s, path.delay_steps)
    hold = hold_gain_warning(robot, measured)
    return (f"LowState arrives every {state_interval_s * 1e3:.1f} ms but pd_step is {path.step_s * 1e3:g} ms: a "
            f"simulator that computes PD once per LowState (Unitree's: SIMULATE_DT = {state_interval_s:.3g}) "
            "steps slower than declared (or runs well under real time). "
            + (hold or "The hold gains are stable there.")
            + " Set its SIMULATE_DT to the declared step (README), or pd_step to its step")
