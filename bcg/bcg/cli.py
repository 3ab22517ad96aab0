"""`bcg`: the suite's command line without ROS 2.

    bcg launch mujoco_check.launch.py policy:=FILE duration:=10 verdict:=out.json
    bcg launch g1_run.launch.py policy:=FILE network_interface:=eth0
    bcg launch mujoco_check.launch.py --show-args
    bcg verdict --metrics M.json --events E.jsonl --verdict V.json --duration 10   (mujoco_check's evaluator)

`bcg launch` runs the graph a launch file declares (its `GRAPH`, the same description its
launch_ros `generate_launch_description` uses) as supervised processes. Launch files are found as
given, else in the workspace's launch/ folder, else in the installed share/bcg/launch.
"""
import argparse
import importlib.util
import sys
from pathlib import Path
from typing import List, Optional

from .launch_graph import LaunchArgumentError, LaunchGraph, Supervisor, parse_assignments, verdict

EXIT_USAGE = 2


def launch_dirs() -> List[Path]:
    dirs = [Path(__file__).resolve().parents[2] / "launch"]
    try:
        from ament_index_python.packages import get_package_share_directory
        dirs.append(Path(get_package_share_directory("bcg")) / "launch")
    except Exception:  # ament_index is absent off ROS 2, or bcg is not installed there
        pass
    dirs.append(Path(sys.prefix) / "share" / "bcg" / "launch")
    return dirs


def find_launch_file(name: str) -> Path:
    given = Path(name)
    candidates = [given] + ([d / given.name for d in launch_dirs()] if len(given.parts) == 1 else [])
    for c in candidates:
        if c.is_file():
            return c
    raise LaunchArgumentError(f"launch file {name!r} not found (looked in: {', '.join(map(str, candidates))})")


def load_graph(path: Path) -> LaunchGraph:
    """The `GRAPH` a launch file declares (the file is imported; launch_ros is not needed for that)."""
    spec = importlib.util.spec_from_file_location(f"bcg_launch_{path.stem.replace('.', '_')}", path)
    if spec is None or spec.loader is None:
        raise LaunchArgumentError(f"launch file {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graph = getattr(module, "GRAPH", None)
    if not isinstance(graph, LaunchGraph):
        raise LaunchArgumentError(f"launch file {path}: declares no GRAPH (a bcg.launch_graph.LaunchGraph)")
    return graph


def cmd_launch(args) -> int:
    try:
        graph = load_graph(find_launch_file(args.file))
        if args.show_args:
            print(graph.usage())
            return 0
        processes = graph.processes(parse_assignments(args.assignments))
    except LaunchArgumentError as e:
        print(f"bcg launch: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    return Supervisor(processes).run()


def cmd_verdict(args) -> int:
    return verdict.run(args.metrics, args.events, args.verdict, args.duration)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="bcg", description="BCG suite command line (no ROS 2 needed)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("launch", help="run a launch file's graph as supervised processes")
    p.add_argument("file", help="launch file, e.g. mujoco_check.launch.py")
    p.add_argument("assignments", nargs="*", metavar="name:=value", help="launch arguments")
    p.add_argument("--show-args", action="store_true", help="print the launch arguments and exit")
    p.set_defaults(func=cmd_launch)
    v = sub.add_parser("verdict", help="mujoco_check evaluator: metrics + node events -> verdict")
    verdict.main_args(v)
    v.set_defaults(func=cmd_verdict)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
