"""Built-in synthetic reference motions: run, jump, fight and dance (no motion capture needed).

Each is procedural: a choreography (`choreography.Choreography`) of planted feet, a root path and
upper-body keyframes, smooth by construction (PCHIP keyframes, cubic Hermite root paths whose
flight segments are exact parabolas under gravity, min-jerk swings), turned into joint angles by
leg inverse kinematics on the robot's own model so planted feet rest flat with their contact spheres
touching z = 0. Random choices (which jumps, punches, dance figures) come from a generator seeded
with `SEED`, so a name always gives the same motion.

Labelling: these are *synthetic*, not motion capture: their names say so (`synthetic_run`, ...), in
memory and on disk (`write_builtin_motions` writes Unitree LAFAN1 CSV files `synthetic_<kind>.csv`
beside a README.md saying how they were made). The bare names (`run`, ...) are the named segments of
real motion capture (config/motions.yaml, `bcg.motion.segments`).
"""
from typing import TYPE_CHECKING, Callable, Dict, Tuple

import numpy as np

from bcg.motion import LAFAN1_FPS

from . import dance, fight, jump, run

if TYPE_CHECKING:        # the generator (MuJoCo, scipy) is imported where a motion is made
    from ..kinematics import RobotKinematics
    from .generator import SyntheticMotion

SEED = 0
"""Seed of the random choices of every built-in motion."""

SYNTHETIC_MOTIONS: Dict[str, Tuple[type, Callable]] = {
    "synthetic_run": (run.RunConfig, run.choreography),
    "synthetic_jump": (jump.JumpConfig, jump.choreography),
    "synthetic_fight": (fight.FightConfig, fight.choreography),
    "synthetic_dance": (dance.DanceConfig, dance.choreography),
}
"""name -> (config dataclass, choreography(config, rng))."""


def synthesize_builtin(name: str, kinematics: "RobotKinematics", fps: float = LAFAN1_FPS, duration_s: float = 15.0,
                       seed: int = SEED) -> "SyntheticMotion":
    """The built-in motion `name` (see SYNTHETIC_MOTIONS), `duration_s` long, sampled at `fps`."""
    from .generator import synthesize
    if name not in SYNTHETIC_MOTIONS:
        raise ValueError(f"no built-in motion {name!r}; built-in: {list(SYNTHETIC_MOTIONS)}")
    config_type, make = SYNTHETIC_MOTIONS[name]
    return synthesize(make(config_type(duration_s=duration_s), np.random.default_rng(seed)), kinematics, fps)
