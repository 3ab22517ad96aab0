"""What `--motion NAME|FILE` means: a built-in synthetic motion by name, or a motion file by path."""
from pathlib import Path
from typing import List, Sequence, Union

from bcg.atomic_file import write_text_atomic
from bcg.contract.motion import JointLimits, LAFAN1_FPS, load_motion, save_motion_csv

from .clip import MotionClip
from .kinematics import RobotKinematics
from .resample import ResampleConfig, build_clip
from .synthetic import SEED, SYNTHETIC_MOTIONS, synthesize_builtin

BUILTIN_MOTIONS = tuple(SYNTHETIC_MOTIONS)
"""Names that `load_clip` synthesises instead of reading a file."""


def load_clip(spec: Union[str, Path], kinematics: RobotKinematics, config: ResampleConfig = ResampleConfig(),
              clip_to_limits: bool = False, builtin_duration_s: float = 15.0) -> MotionClip:
    """The clip for `spec` at `config.rate_hz`: a built-in name ("run", "jump", "fight", "dance") is
    synthesised directly at that rate, `builtin_duration_s` long (nothing to interpolate, no file
    needed); anything else is a `.csv` / `.npz` path, loaded and checked against the robot's joint
    limits (`clip_to_limits`: clip with a warning instead of failing), then resampled."""
    if str(spec) in BUILTIN_MOTIONS:
        motion = synthesize_builtin(str(spec), kinematics, config.rate_hz, builtin_duration_s).motion
    else:
        motion = load_motion(spec, limits=JointLimits.of(kinematics.robot), clip_to_limits=clip_to_limits)
    return build_clip(motion, kinematics, config, name=str(spec))


def write_builtin_motions(folder: Union[str, Path], kinematics: RobotKinematics,
                          names: Sequence[str] = BUILTIN_MOTIONS, duration_s: float = 15.0) -> List[Path]:
    """Write the built-in motions as LAFAN1 CSV files `synthetic_<name>.csv` (30 frames/s) and a
    README.md saying they are synthetic; each file written atomically. Returns the CSV paths."""
    folder = Path(folder)
    paths = [save_motion_csv(synthesize_builtin(name, kinematics, LAFAN1_FPS, duration_s).motion,
                             folder / f"synthetic_{name}.csv") for name in names]
    text = (f"# Synthetic reference motions (not motion capture)\n\n"
            f"Written by `python -m bcg_train.motion write` (bcg_train.motion.synthetic, seed {SEED}) for the "
            f"model {kinematics.robot.model_path.name}: {', '.join(names)}, {duration_s:g} s each.\n\n"
            "Format: Unitree's retargeted LAFAN1 CSV (30 frames/s, no header, 36 columns: root x y z, root "
            "quaternion x y z w, 29 joint angles in SDK order). Procedural keyframes; legs by inverse kinematics "
            "so planted feet rest flat on z = 0; ballistic root in flight phases.\n")
    write_text_atomic(folder / "README.md", text)
    return paths
