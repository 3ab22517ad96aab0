"""`bcg-ship`: a trained run as a shipped policy: the ONNX file and its provenance sidecar.

    bcg-ship RUN_DIR|CHECKPOINT [--out policies] [--name shac_dance_k300]

Writes OUT/NAME.onnx (exported as `bcg-export` does, contract included) and OUT/NAME.json, the
sidecar `bcg-table` cites: the commands that train the run again (its preset plus one `--set` per
setting that differs from the preset, then a `bcg-train --resume` per extension of its schedule,
with `--stop-at` where a part stopped early), the export and evaluation commands, the iteration and
environment steps reached, the seed and the full config. The default NAME is
<algorithm>_<motion>_k<kappa> (the name `bcg-table` looks for; a motion file's stem and window:
`shac_dance1_subject1_5-20_k300`). The evaluation itself
(NAME.eval.json) is written by `bcg-table OUT` or `bcg-eval`.
"""
import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

import yaml

from bcg.atomic_file import write_text_atomic
from bcg.config_check import ConfigError, dotted_leaves

from ..checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from ..motion.library import motion_label
from .table import policy_name

if TYPE_CHECKING:         # the config's algorithms and the exporter load torch: imported where they are used
    from ..train_config import TrainConfig

SIDECAR_FORMAT = 1
EVAL_SEEDS, EVAL_DURATION_S = 5, 15.0
"""The evaluation the sidecar's command names (the paper's: 5 MuJoCo seeds of 15 s)."""


def _yaml_value(value: Any) -> str:
    """`value` as the YAML text `--set KEY=VALUE` parses back to it."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def train_command(run_info: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """The `bcg-train` command that trains a run with this config again: the run's preset plus a
    `--set` for each setting that differs from the preset (ConfigError when the preset is unknown).
    A setting the config predates counts at its default, so the command names it where the preset
    now differs from that default. A run started from another's networks names that checkpoint
    (`--init-from '<its run folder>/checkpoints/...'`)."""
    from ..train_config import config_from_dict, load_preset
    preset = run_info.get("preset") or "paper"
    base = dict(dotted_leaves(load_preset(preset).to_dict()))
    full = config_from_dict(config).to_dict()
    overrides = [f"{key}={_yaml_value(value)}" for key, value in dotted_leaves(full) if base.get(key) != value]
    args = ["bcg-train", "--preset", preset, "--motion", str(run_info["motion"])]
    for item in overrides:
        args += ["--set", item]
    start = run_info.get("init_from")
    # the run folder or policy file it started from, by name (its place differs between machines); the
    # preset's own start (runner.init_from) goes without saying
    if start and not start.get("from_config"):
        where = f"<{start['policy']}>" if "policy" in start else f"<{start['run']}>/checkpoints/{start['checkpoint']}"
        args += ["--init-from", where]
    if run_info.get("device") not in (None, "cpu"):
        args += ["--device", str(run_info["device"])]
    return shlex.join(args)


def train_commands(run_info: Mapping[str, Any], config: Mapping[str, Any], iteration: int) -> List[str]:
    """The commands that train the run to `iteration` again, one per part of its schedule
    (`recorded_schedule`): `train_command` planned for the first part's iterations,
    then `bcg-train --resume <run> --iterations N` per extension, each with `--stop-at K` where the
    part ended (Ctrl-C) before its plan."""
    from ..train_config import config_from_dict, recorded_schedule
    full = config_from_dict(config)
    schedule = recorded_schedule(run_info, full)
    ends = [start for start, _ in schedule[1:]] + [int(iteration)]
    commands = []
    for k, ((_, planned), end) in enumerate(zip(schedule, ends)):
        if k == 0:
            command = train_command(run_info, full.with_iterations(planned).to_dict())
            command += " --run-dir '<run>'" if len(schedule) > 1 else ""
        else:
            command = shlex.join(["bcg-train", "--resume", "<run>", "--iterations", str(planned)])
        commands.append(command + (f" --stop-at {end}" if end < planned else ""))
    return commands


def sidecar(state: Mapping[str, Any], cfg: "TrainConfig", onnx_path: Path, checkpoint: Path) -> Dict[str, Any]:
    """The provenance record of a policy exported from checkpoint `state` (its config `cfg`)."""
    config = cfg.to_dict()
    run_info = dict(state["run_info"])
    kappa = cfg.env.sim.kappa
    commands = train_commands(run_info, config, int(state["iteration"]))
    return {
        "format": SIDECAR_FORMAT,
        "policy": onnx_path.name,
        "algorithm": state["algorithm_name"],
        "motion": run_info["motion"],
        "kappa": kappa,
        "bundling": cfg.env.sim.bundle.enabled,
        "preset": run_info.get("preset"),
        "seed": cfg.runner.seed,
        "iteration": int(state["iteration"]),
        "iterations_planned": int(config[state["algorithm_name"]]["iterations"]),
        "env_steps": state.get("env_steps"),   # recorded by the runner; None in checkpoints older than that
        "train_wall_clock_s": float(state["wall_clock_s"]),
        "schedule": run_info.get("schedule"),   # None in checkpoints older than schedules: never extended
        "init_from": run_info.get("init_from"),   # the checkpoint whose networks it started from, if any
        "train_command": commands[0],
        "resume_commands": commands[1:],
        "export_command": shlex.join(["bcg-export", f"<run>/checkpoints/{checkpoint.name}", "-o", onnx_path.name]),
        "eval_command": shlex.join(["bcg-eval", onnx_path.name, "--seeds", str(EVAL_SEEDS),
                                    "--duration", f"{EVAL_DURATION_S:g}"]),
        "config": config,
    }


def ship(checkpoint: Path, out: Path, name: Optional[str] = None) -> Tuple[Path, Path]:
    """Export `checkpoint` (a file or a run folder: its newest) to OUT/NAME.onnx and write its
    sidecar OUT/NAME.json; (onnx path, sidecar path). Raises CheckpointError, ExportError, ConfigError."""
    from ..export import export_state
    from ..train_config import config_from_dict
    path = find_checkpoint(checkpoint)
    state = load_checkpoint(path)
    cfg = config_from_dict(state["config"])
    name = name or policy_name(state["algorithm_name"], motion_label(str(state["run_info"]["motion"])),
                               cfg.env.sim.kappa)
    out.mkdir(parents=True, exist_ok=True)
    onnx_path, _ = export_state(state, path, out / f"{name}.onnx")
    side = out / f"{name}.json"
    write_text_atomic(side, json.dumps(sidecar(state, cfg, onnx_path, path), indent=2) + "\n")
    return onnx_path, side


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="bcg-ship", description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", type=Path, help="checkpoint file, or a run folder (its newest checkpoint)")
    p.add_argument("--out", type=Path, default=Path("policies"), help="folder of shipped policies")
    p.add_argument("--name", help="file stem (default: <algorithm>_<motion>_k<kappa>)")
    args = p.parse_args(argv)
    from ..export import ExportError
    try:
        onnx_path, side = ship(args.checkpoint, args.out, args.name)
    except (CheckpointError, ExportError, ConfigError) as e:
        print(f"bcg-ship: {e}", file=sys.stderr)
        return 1
    print(f"wrote {onnx_path} and {side}\n  evaluate: bcg-table {args.out} (or bcg-eval {onnx_path})")
    return 0
