"""The node's PD gains against the control path its commands meet (`bcg.robot.pd_stability.PdPath`,
declared by `pd_step` / `pd_delay_steps`): its damping gain capped per joint where that path needs
it, and a warning at start when the policy's own gains would not be stable there."""
from typing import Optional, Tuple

import numpy as np

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


def policy_gain_warning(contract, robot, path: PdPath) -> Optional[str]:
    """A warning naming the joints whose contract gains (kp, kd) are not stable with GAIN_MARGIN on
    `path`, or None. The contract's joints must be the robot's (JointMap checks that first)."""
    joints = [robot.joint_names.index(name) for name in contract.joint_names]
    margin = gain_margin(contract.kp, contract.kd, robot.joint_inertia[joints], path)
    weak = np.flatnonzero(margin < GAIN_MARGIN)
    if not weak.size:
        return None
    state = "unstable" if margin.min() < 1.0 else "barely stable"
    listed = ", ".join(f"{contract.joint_names[j]} (kp {contract.kp[j]:.4g}, kd {contract.kd[j]:.3g}, margin "
                       f"{margin[j]:.2f})" for j in weak[np.argsort(margin[weak])])
    return (f"the policy's gains are {state} under {path} ({PATH_SETTINGS}: what its commands meet), "
            f"stable meaning {GAIN_MARGIN:g} x the gains would still be: {listed}. Expect shaking and |dq| "
            "faults (README: against Unitree's MuJoCo simulator)")
