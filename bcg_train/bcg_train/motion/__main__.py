"""python -m bcg_train.motion: write, check or picture reference motions.

    python -m bcg_train.motion write [--out DIR] [--duration S] [NAME ...]        (built-in synthetic motions)
    python -m bcg_train.motion check [--rate HZ] [--spike-speed RAD_S] [NAME|FILE ...]   (exit 1 when one fails)
    python -m bcg_train.motion preview NAME|FILE -o OUT.png|OUT.gif [--fps 10] [--rate HZ]
    python -m bcg_train.motion node-motion NAME|FILE [--out DIR] [--duration S]     (--out for a built-in NAME)

NAME: a built-in synthetic motion (synthetic_run, ...) or a named segment of real motion capture
(run, jump, ...; config/motions.yaml, files from --motion-dir or $BCG_MOTION_DIR). FILE: a motion
file, `FILE.csv|FILE.npz[@START:END][,fps=HZ][,joint_order=sdk|isaaclab][,despike=RAD_S]`.
`check` without names checks every built-in motion and, when the motion folder is found, every
named segment. `node-motion` prints what the nodes' `motion` argument (mujoco_check's `motion:=`)
should be: the file with its window (FILE.csv@START:END), or for a built-in motion, which has no
file, the one it writes to the folder `--out DIR` (DIR/NAME.csv; without --out it refuses: it
writes nowhere it was not told). The G1 model comes from --model or $BCG_G1_MODEL.
"""
import argparse
import os
import sys
from typing import Optional

os.environ.setdefault("MUJOCO_GL", "egl")   # offscreen rendering backend, before mujoco is imported

from bcg.motion import MotionDirNotFoundError, MotionFileError, load_motion  # noqa: E402
from bcg.motion.segments import named_segments, resolve_motion_dir  # noqa: E402
from bcg.motion.spikes import SPIKE_SPEED  # noqa: E402
from bcg.robot import RobotDescription  # noqa: E402

from .checks import FileCheckLimits, check_builtin, check_file_motion  # noqa: E402
from .kinematics import RobotKinematics  # noqa: E402
from .library import BUILTIN_MOTIONS, load_clip, motion_file_for_nodes, motion_source, write_builtin_motions  # noqa: E402
from .preview import render_preview  # noqa: E402
from .resample import ResampleConfig  # noqa: E402
from .synthetic.profiles import GRAVITY  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bcg_train.motion", description=__doc__.split("\n")[0])
    p.add_argument("--model", help="G1 MuJoCo XML (default: $BCG_G1_MODEL)")
    p.add_argument("--motion-dir", help="folder of the named segments' motion files (default: $BCG_MOTION_DIR)")
    sub = p.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="write <name>.csv (LAFAN1 CSV, 30 fps) and a README.md")
    write.add_argument("names", nargs="*", help=f"of {', '.join(BUILTIN_MOTIONS)} (default: all)")
    write.add_argument("--out", default="motions", help="folder (default: ./motions)")
    write.add_argument("--duration", type=float, default=15.0, help="seconds per motion (default 15)")
    check = sub.add_parser("check", help="check built-in motions (feet, limits, continuity, flight, self-collision) "
                                         "and motion files (velocity spikes, limits, flight phases, root speed, "
                                         "frame rate against gravity, root orientation)")
    check.add_argument("names", nargs="*", help="NAME or FILE (default: every built-in and named motion)")
    check.add_argument("--rate", type=float, default=50.0, help="control rate of the built-in clips, frames/s")
    check.add_argument("--spike-speed", type=float, default=SPIKE_SPEED,
                       help=f"rad/s above which a frame-to-frame joint speed is a spike (default {SPIKE_SPEED:g})")
    preview = sub.add_parser("preview", help="render a motion")
    preview.add_argument("motion", help="NAME or FILE")
    preview.add_argument("-o", "--out", required=True, help=".png (contact sheet) or .gif")
    preview.add_argument("--fps", type=float, default=10.0, help="pictures per second of motion (default 10)")
    preview.add_argument("--rate", type=float, default=50.0, help="control rate, frames/s (default 50)")
    node = sub.add_parser("node-motion", help="print the nodes' motion argument for a motion")
    node.add_argument("motion", help="NAME or FILE")
    node.add_argument("--out", help="folder a built-in motion is written to (it needs one; a named segment or a file "
                                    "is printed, nothing written)")
    node.add_argument("--duration", type=float, default=15.0, help="seconds of a built-in motion (default 15)")
    args = p.parse_args(argv)
    error = usage_error(args)
    if error:
        p.error(error)
    kinematics = RobotKinematics(RobotDescription.load(args.model))
    try:
        if args.command == "write":
            for path in write_builtin_motions(args.out, kinematics, args.names or BUILTIN_MOTIONS, args.duration):
                print(path)
            return 0
        if args.command == "node-motion":
            print(motion_file_for_nodes(args.motion, kinematics, args.out, args.duration, args.motion_dir))
            return 0
        if args.command == "preview":
            clip = load_clip(args.motion, kinematics, ResampleConfig(rate_hz=args.rate), motion_dir=args.motion_dir)
            print(render_preview(clip, kinematics, args.out, fps=args.fps))
            return 0
        names = args.names or default_check_names(args.motion_dir)
        builtin = [n for n in names if n in BUILTIN_MOTIONS]
        files = [n for n in names if n not in BUILTIN_MOTIONS]
        failed = check_builtins(builtin, kinematics, args.rate) if builtin else False
        if files:
            failed |= check_files(files, kinematics, args.motion_dir, FileCheckLimits(spike_speed=args.spike_speed))
    except (MotionFileError, ValueError) as e:   # bad motion file, name or option; bad synthetic duration
        print(f"python -m bcg_train.motion: {e}", file=sys.stderr)
        return 2
    return 1 if failed else 0


def usage_error(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the command line beyond what argparse checks, or None."""
    if args.command == "write":
        unknown = [n for n in args.names if n not in BUILTIN_MOTIONS]
        if unknown:
            return f"unknown motion(s) {unknown}; built-in: {', '.join(BUILTIN_MOTIONS)}"
    if args.command == "node-motion" and args.motion in BUILTIN_MOTIONS and args.out is None:
        return (f"node-motion: {args.motion} is built in and has no file: --out DIR writes it there "
                f"(the nodes' motion is then DIR/{args.motion}.csv)")
    return None


def default_check_names(motion_dir):
    """Every built-in motion, then every named segment when the motion folder is found (else a note)."""
    try:
        resolve_motion_dir(motion_dir)
    except MotionDirNotFoundError as e:
        print(f"named segments not checked: {e}", file=sys.stderr)
        return list(BUILTIN_MOTIONS)
    return list(BUILTIN_MOTIONS) + list(named_segments())


def check_builtins(names, kinematics: RobotKinematics, rate_hz: float) -> bool:
    """Print the built-in motions' table; True when one fails."""
    failed = False
    print(f"{'motion':16} {'stance mm':>9} {'swing mm':>8} {'margin rad':>10} {'step rad/s':>10} {'speed m/s':>9} "
          f"{'apex m':>6} {'flight':>6} {'|z+g|':>6} {'self mm':>7}  verdict")
    for name in names:
        r = check_builtin(name, kinematics, ResampleConfig(rate_hz=rate_hz))
        failures = r.failures()
        failed |= bool(failures)
        print(f"{name:16} {r.stance_height_error_m * 1e3:9.3f} {r.swing_min_height_m * 1e3:8.2f} "
              f"{r.limit_margin_rad:10.3f} {r.max_joint_step_rad * r.fps:10.1f} {r.max_root_speed:9.2f} "
              f"{r.root_apex_m:6.2f} {r.flight_frames:6d} {r.flight_accel_error:6.2f} "
              f"{r.self_penetration_m * 1e3:7.1f}  "
              + ("; ".join(failures) if failures else "ok"))
    return failed


def check_files(specs, kinematics: RobotKinematics, motion_dir, limits: FileCheckLimits) -> bool:
    """Print the table of motions read from files (named segments or FILE specs); True when one fails."""
    failed = False
    print(f"{'motion':16} {'seconds':>7} {'fps':>5} {'max rad/s':>9} {'(joint)':24} {'spikes':>6} {'limit':>5} "
          f"{'flights':>7} {'longest s':>9} {'root m/s':>8} {'max':>5} {'root z':>6} {'foot mm':>7} {'fall g':>6} "
          f"{'flight g':>8} {'tilted':>6}  verdict")
    for spec in specs:
        source = motion_source(spec, motion_dir)
        r = check_file_motion(spec, load_motion(source), kinematics, limits)
        failures = r.failures()
        failed |= bool(failures)
        print(f"{spec:16} {r.duration_s:7.2f} {r.fps:5g} {r.max_joint_speed:9.1f} {r.max_joint_speed_joint:24} "
              f"{len(r.spikes):6d} {r.limit_violations:5d} {r.flight_phases:7d} {r.longest_flight_s:9.2f} "
              f"{r.mean_root_speed:8.2f} {r.max_root_speed:5.2f} {r.root_height_min_m:6.2f} "
              f"{r.foot_height_min_m * 1e3:7.1f} {r.root_fall_accel / GRAVITY:6.2f} {r.flight_accel / GRAVITY:8.2f} "
              f"{r.tilted_fraction:6.0%}  " + ("; ".join(failures) if failures else "ok")
              + ("" if spec == str(source) else f"  [{source}]"))
    return failed


if __name__ == "__main__":
    sys.exit(main())
