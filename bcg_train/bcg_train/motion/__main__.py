"""python -m bcg_train.motion: write, check or picture the built-in synthetic motions.

    python -m bcg_train.motion write [--out DIR] [--duration S] [NAME ...]
    python -m bcg_train.motion check [--rate HZ] [NAME ...]        (exit 1 when a check fails)
    python -m bcg_train.motion preview NAME|FILE -o OUT.png|OUT.gif [--fps 10] [--rate HZ]

The G1 model comes from --model or $BCG_G1_MODEL.
"""
import argparse
import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")   # offscreen rendering backend, before mujoco is imported

from bcg.robot import RobotDescription  # noqa: E402

from .checks import check_builtin  # noqa: E402
from .kinematics import RobotKinematics  # noqa: E402
from .library import BUILTIN_MOTIONS, load_clip, write_builtin_motions  # noqa: E402
from .preview import render_preview  # noqa: E402
from .resample import ResampleConfig  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bcg_train.motion", description=__doc__.split("\n")[0])
    p.add_argument("--model", help="G1 MuJoCo XML (default: $BCG_G1_MODEL)")
    sub = p.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="write synthetic_<name>.csv (LAFAN1 CSV, 30 fps) and a README.md")
    write.add_argument("names", nargs="*", help=f"of {', '.join(BUILTIN_MOTIONS)} (default: all)")
    write.add_argument("--out", default="motions", help="folder (default: ./motions)")
    write.add_argument("--duration", type=float, default=15.0, help="seconds per motion (default 15)")
    check = sub.add_parser("check", help="check feet, limits, continuity, flight and self-collision")
    check.add_argument("names", nargs="*", help=f"of {', '.join(BUILTIN_MOTIONS)} (default: all)")
    check.add_argument("--rate", type=float, default=50.0, help="control rate, frames/s (default 50)")
    preview = sub.add_parser("preview", help="render a built-in motion or a motion file")
    preview.add_argument("motion", help=f"one of {', '.join(BUILTIN_MOTIONS)} or a .csv / .npz file")
    preview.add_argument("-o", "--out", required=True, help=".png (contact sheet) or .gif")
    preview.add_argument("--fps", type=float, default=10.0, help="pictures per second of motion (default 10)")
    preview.add_argument("--rate", type=float, default=50.0, help="control rate, frames/s (default 50)")
    args = p.parse_args(argv)
    names = getattr(args, "names", None) or BUILTIN_MOTIONS
    unknown = [n for n in names if n not in BUILTIN_MOTIONS]
    if unknown:
        p.error(f"unknown motion(s) {unknown}; built-in: {', '.join(BUILTIN_MOTIONS)}")
    kinematics = RobotKinematics(RobotDescription.load(args.model))
    if args.command == "write":
        for path in write_builtin_motions(args.out, kinematics, names, args.duration):
            print(path)
        return 0
    if args.command == "preview":
        clip = load_clip(args.motion, kinematics, ResampleConfig(rate_hz=args.rate))
        print(render_preview(clip, kinematics, args.out, fps=args.fps))
        return 0
    failed = False
    print(f"{'motion':8} {'stance mm':>9} {'swing mm':>8} {'margin rad':>10} {'step rad/s':>10} {'speed m/s':>9} "
          f"{'apex m':>6} {'flight':>6} {'|z+g|':>6} {'self mm':>7}  verdict")
    for name in names:
        r = check_builtin(name, kinematics, ResampleConfig(rate_hz=args.rate))
        failures = r.failures()
        failed |= bool(failures)
        print(f"{name:8} {r.stance_height_error_m * 1e3:9.3f} {r.swing_min_height_m * 1e3:8.2f} "
              f"{r.limit_margin_rad:10.3f} {r.max_joint_step_rad * r.fps:10.1f} {r.max_root_speed:9.2f} "
              f"{r.root_apex_m:6.2f} {r.flight_frames:6d} {r.flight_accel_error:6.2f} "
              f"{r.self_penetration_m * 1e3:7.1f}  "
              + ("; ".join(failures) if failures else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
