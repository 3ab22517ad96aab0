"""What `--motion NAME|FILE` means: a named segment of real motion capture, a built-in synthetic
motion, or a motion file (with its options: `bcg.motion.source`). Naming and finding motions loads
neither MuJoCo nor scipy (the command lines' help lists them): clips are built where they are loaded."""
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Union

from bcg.atomic_file import write_text_atomic
from bcg.motion import LAFAN1_FPS, JointLimits, MotionDirNotFoundError, MotionSource, load_motion, save_motion_csv
from bcg.motion.segments import ENV_VAR as MOTION_DIR_ENV_VAR
from bcg.motion.segments import named_segments, resolve_motion_dir, segment_source
from bcg.motion.source import SYNTAX

from .synthetic import SEED, SYNTHETIC_MOTIONS, synthesize_builtin

if TYPE_CHECKING:
    from .clip import MotionClip
    from .kinematics import RobotKinematics
    from .resample import ResampleConfig

BUILTIN_MOTIONS = tuple(SYNTHETIC_MOTIONS)
"""Names that `load_clip` synthesises instead of reading a file (synthetic_run, ...)."""


def motion_help() -> str:
    """The `--motion` help of the command lines."""
    return (f"reference motion: a named segment of real motion capture ({', '.join(named_segments())}; "
            f"config/motions.yaml, files from --motion-dir or ${MOTION_DIR_ENV_VAR}), a built-in synthetic motion "
            f"({', '.join(BUILTIN_MOTIONS)}) or a .csv / .npz file: {SYNTAX}")


def motion_source(spec: Union[str, Path], motion_dir: Optional[Union[str, Path]] = None) -> MotionSource:
    """The file (and window, options) that `spec` names: a named segment's window of the motion
    folder (`motion_dir`, else $BCG_MOTION_DIR), or `spec` parsed as a motion file: as given, or, when
    a relative path is not found from here, the file of that name in the motion folder (so
    `dance1_subject1.csv@5:20` means the same on every machine). Built-in names have no file: ValueError."""
    if str(spec) in BUILTIN_MOTIONS:
        raise ValueError(f"motion {spec!r} is built in (synthetic), not a file")
    if str(spec) in named_segments():
        try:
            return segment_source(str(spec), motion_dir)
        except MotionDirNotFoundError as e:
            raise MotionDirNotFoundError(f"{e} Built-in synthetic motions need no data: "
                                         f"{', '.join(BUILTIN_MOTIONS)}.") from None
    source = MotionSource.parse(spec)
    if not source.path.is_absolute() and not source.path.exists():     # a file of the motion folder, by name
        try:
            in_folder = resolve_motion_dir(motion_dir) / source.path
        except MotionDirNotFoundError:
            return source
        if in_folder.is_file():
            return dataclasses.replace(source, path=in_folder)
    return source


def motion_label(spec: Union[str, Path]) -> str:
    """A short name for what `spec` names, for file names: a built-in or named motion's own name, a
    file's `MotionSource.label` (its stem and window)."""
    if str(spec) in BUILTIN_MOTIONS or str(spec) in named_segments():
        return str(spec)
    return MotionSource.parse(spec).label


def load_clip(spec: Union[str, Path], kinematics: "RobotKinematics", config: Optional["ResampleConfig"] = None,
              clip_to_limits: bool = False, builtin_duration_s: float = 15.0,
              motion_dir: Optional[Union[str, Path]] = None) -> "MotionClip":
    """The clip for `spec` at `config.rate_hz` (default `ResampleConfig()`): a built-in name
    (`BUILTIN_MOTIONS`) is synthesised directly at that rate, `builtin_duration_s` long (nothing to
    interpolate, no file needed); anything else (a named segment, a file) is loaded through
    `motion_source`, checked against the robot's joint limits (`clip_to_limits`: clip with a warning
    instead of failing), then resampled. The clip is named `spec`."""
    from .resample import ResampleConfig, build_clip
    config = config or ResampleConfig()
    if str(spec) in BUILTIN_MOTIONS:
        motion = synthesize_builtin(str(spec), kinematics, config.rate_hz, builtin_duration_s).motion
    else:
        motion = load_motion(motion_source(spec, motion_dir), limits=JointLimits.of(kinematics.robot),
                             clip_to_limits=clip_to_limits)
    return build_clip(motion, kinematics, config, name=str(spec))


def motion_file_for_nodes(spec: Union[str, Path], kinematics: "RobotKinematics", folder: Union[str, Path],
                          builtin_duration_s: float = 15.0, motion_dir: Optional[Union[str, Path]] = None) -> str:
    """What the nodes' `motion` argument should be for `spec`: a built-in motion written as a LAFAN1
    CSV into `folder` (`write_builtin_motions`), else the string form of `motion_source(spec)`."""
    if str(spec) in BUILTIN_MOTIONS:
        return str(write_builtin_motions(folder, kinematics, [str(spec)], builtin_duration_s)[0])
    return str(motion_source(spec, motion_dir))


def write_builtin_motions(folder: Union[str, Path], kinematics: "RobotKinematics",
                          names: Sequence[str] = BUILTIN_MOTIONS, duration_s: float = 15.0) -> List[Path]:
    """Write the built-in motions as LAFAN1 CSV files `<name>.csv` (30 frames/s) and a README.md
    saying they are synthetic; each file written atomically. Returns the CSV paths."""
    folder = Path(folder)
    paths = [save_motion_csv(synthesize_builtin(name, kinematics, LAFAN1_FPS, duration_s).motion,
                             folder / f"{name}.csv") for name in names]
    text = (f"# Synthetic reference motions (not motion capture)\n\n"
            f"Written by `python -m bcg_train.motion write` (bcg_train.motion.synthetic, seed {SEED}) for the "
            f"model {kinematics.robot.model_path.name}: {', '.join(names)}, {duration_s:g} s each.\n\n"
            "Format: Unitree's retargeted LAFAN1 CSV (30 frames/s, no header, 36 columns: root x y z, root "
            "quaternion x y z w, 29 joint angles in SDK order). Procedural keyframes; legs by inverse kinematics "
            "so planted feet rest flat on z = 0; ballistic root in flight phases.\n")
    write_text_atomic(folder / "README.md", text)
    return paths
