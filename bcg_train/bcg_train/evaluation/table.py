"""`bcg-table`: the paper's sim-to-sim table from a folder of exported policies.

    bcg-table POLICY_DIR [--motions run,jump,fight,dance] [--kappas 50,100,300] [--seeds 5]
              [--duration 15] [--out out/table]

A cell (motion, kappa) is the SHAC + BCG policy `shac_<motion>_k<kappa>.onnx` in POLICY_DIR; its PPO
counterpart, when present, is `ppo_<motion>_k<kappa>.onnx`. Each policy is evaluated as `bcg-eval`
does (`seeds` runs of `duration` s in MuJoCo and in the training simulator, and in MuJoCo from rest
as the policy node starts the robot: `bcg-eval --from-rest`, also after a hold: `--hold`) unless POLICY_DIR already
holds its evaluation (`<policy>.eval.json`, written by this command for the same policy file, by its
SHA-256, with the same seeds and duration).
A policy's `<policy>.json` sidecar, when present, gives the commands that trained and exported it
(`train_command` and its `resume_commands`, `export_command`); the table cites them. Missing cells
are listed with the command that would train them. Writes OUT/table.md, OUT/table.csv and OUT/table.png.
"""
import argparse
import csv
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from bcg.atomic_file import write_atomic, write_text_atomic

from .cli import evaluate

PAPER = {  # docs/method.md: (falls out of 5, penetration difference [mm]) at kappa 50, 100, 300; tracking [cm]
    "falls": {50.0: {"run": 5, "jump": 5, "fight": 5, "dance": 5}, 100.0: {"run": 5, "jump": 4, "fight": 3, "dance": 4},
              300.0: {"run": 0, "jump": 0, "fight": 0, "dance": 0}},
    "penetration_mm": {50.0: {"run": 10.6, "jump": 12.6, "fight": 13.3, "dance": 13.5},
                       100.0: {"run": 8.1, "jump": 10.8, "fight": 9.1, "dance": 9.5},
                       300.0: {"run": 3.1, "jump": 3.3, "fight": 3.4, "dance": 2.9}},
    "tracking_shac_cm": {"run": 34.1, "jump": 18.6, "fight": 13.5, "dance": 18.5},
    "tracking_ppo_cm": {"run": 42.8, "jump": 18.0, "fight": 34.3, "dance": 19.0},
}
"""The paper's numbers (docs/method.md, "The paper's results")."""


HOLD_S = 0.4
"""s the robot stands unsupported under the policy's gains before its policy starts, for the table's
"after a hold" column (`bcg-eval --from-rest --hold`): the start of the policy node's DDS check, where
a band lets the robot go as the policy starts. On 2026-12-05 it separated the shipped policies that
pass that check (walk, run, fight, jump trained with leaning starts: 0/5 falls) from those that fall
in it (jump trained from exact rest only, dance: 5/5 and 2/5), where starting from exact rest did not."""


def policy_name(algorithm: str, motion: str, kappa: float) -> str:
    return f"{algorithm}_{motion}_k{kappa:g}"


def cell(folder: Path, algorithm: str, motion: str, kappa: float, seeds: int, duration: float,
         model: Optional[str], log) -> Optional[dict]:
    """The evaluation of one policy (evaluated now unless its eval.json is of this very file, by its
    SHA-256, with the same seeds and duration), MuJoCo runs from rest included (`bcg-eval
    --from-rest`: as the policy node starts the robot; and after a hold of HOLD_S), with its
    sidecar's commands; None when the
    policy file is absent."""
    name = policy_name(algorithm, motion, kappa)
    path = folder / f"{name}.onnx"
    if not path.is_file():
        return None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    cached = folder / f"{name}.eval.json"
    result = json.loads(cached.read_text()) if cached.is_file() else None
    command = f"bcg-eval {path} --motion {motion} --seeds {seeds} --duration {duration:g}"
    if (result is None or result.get("policy_sha256") != digest or result.get("seeds") != seeds
            or result.get("duration_s") != duration or "tracking_error_root_xy_mujoco_cm" not in result["summary"]):
        log(f"evaluating {path} ({seeds} seeds x {duration:g} s)")
        result = evaluate(path, motion, seeds, duration, model=model,
                          log=lambda line: log(f"  {name}: {line}"))
        result.update(seeds=seeds, duration_s=duration, policy_sha256=digest, command=command)
    if "self_contact_mujoco_s" not in result["summary"]:   # evaluated before bcg-eval measured it
        log(f"evaluating {path} for the legs' self-contact ({seeds} seeds x {duration:g} s, MuJoCo)")
        again = evaluate(path, motion, seeds, duration, model=model, warp=False,
                         log=lambda line: log(f"  {name}: {line}"))
        result["summary"]["self_contact_mujoco_s"] = again["summary"]["self_contact_mujoco_s"]
        result["runs"]["mujoco"] = again["runs"]["mujoco"]
        write_text_atomic(cached, json.dumps(result, indent=2))
    starts = (("from_rest", 0.0, "--from-rest"), ("after_hold", HOLD_S, f"--from-rest --hold {HOLD_S:g}"))
    for start, hold_s, flags in starts:
        if f"falls_mujoco_{start}" not in result["summary"]:
            log(f"evaluating {path} {flags} ({seeds} seeds x {duration:g} s, MuJoCo)")
            again = evaluate(path, motion, seeds, duration, model=model, warp=False, from_rest=True, hold_s=hold_s,
                             log=lambda line: log(f"  {name} {flags}: {line}"))
            result["summary"][f"falls_mujoco_{start}"] = again["summary"]["falls_mujoco"]
            result["runs"][f"mujoco_{start}"] = again["runs"]["mujoco"]
            result[f"command_{start}"] = f"{command} {flags} --mujoco-only"
            write_text_atomic(cached, json.dumps(result, indent=2))
    sidecar = folder / f"{name}.json"
    result["provenance"] = json.loads(sidecar.read_text()) if sidecar.is_file() else {}
    return result


def rows_of(folder: Path, motions: Sequence[str], kappas: Sequence[float], seeds: int, duration: float,
            model: Optional[str], log) -> List[Dict]:
    rows = []
    for kappa in kappas:
        for motion in motions:
            shac = cell(folder, "shac", motion, kappa, seeds, duration, model, log)
            ppo = cell(folder, "ppo", motion, kappa, seeds, duration, model, log)
            row = {"motion": motion, "kappa": kappa, "present": shac is not None,
                   "paper_falls": PAPER["falls"].get(kappa, {}).get(motion),
                   "paper_penetration_mm": PAPER["penetration_mm"].get(kappa, {}).get(motion),
                   "paper_tracking_shac_cm": PAPER["tracking_shac_cm"].get(motion) if kappa == 300.0 else None,
                   "paper_tracking_ppo_cm": PAPER["tracking_ppo_cm"].get(motion) if kappa == 300.0 else None}
            if shac is not None:
                s = shac["summary"]
                row.update(falls=s["falls_mujoco"], seeds=s["seeds"], falls_warp=s["falls_warp"],
                           time_up_s=mean_time_up(shac),
                           penetration_diff_mm=s["penetration_diff_mm"], tracking_cm=s["tracking_error_mujoco_cm"],
                           tracking_root_xy_cm=s["tracking_error_root_xy_mujoco_cm"],
                           self_contact_s=s["self_contact_mujoco_s"],
                           falls_from_rest=s["falls_mujoco_from_rest"], falls_after_hold=s["falls_mujoco_after_hold"],
                           eval_command=shac["command"])
                row.update(training=training_of(shac["provenance"]))
            if ppo is not None:
                row.update(ppo_falls=ppo["summary"]["falls_mujoco"], ppo_seeds=ppo["summary"]["seeds"],
                           ppo_tracking_cm=ppo["summary"]["tracking_error_mujoco_cm"],
                           ppo_time_up_s=mean_time_up(ppo),
                           ppo_eval_command=ppo["command"], ppo_training=training_of(ppo["provenance"]))
            rows.append(row)
    return rows


def mean_time_up(evaluation: Dict) -> float:
    """s: the mean simulated time of an evaluation's MuJoCo runs on the reference (to the fall, or the run's length)."""
    return sum(r["duration_s"] for r in evaluation["runs"]["mujoco"]) / evaluation["summary"]["seeds"]


def training_of(provenance: Dict) -> str:
    """How a policy was trained, from its sidecar: its commands, the environment steps of its own run
    and where that run started (the start policy's own steps are not counted)."""
    commands = "`, then `".join(c for c in [provenance.get("train_command", ""),
                                            *provenance.get("resume_commands", [])] if c)
    text = f"`{commands}`" if commands else "not recorded"
    if provenance.get("env_steps"):
        text += f" ({provenance['env_steps']:,} environment steps"
        start = provenance.get("init_from") or {}
        if start.get("run"):
            text += f", started from run {start['run']} at iteration {start['iteration']}"
        elif start.get("policy"):
            text += f", started from the policy {start['policy']}"
        text += ")"
    return text


def _ppo_cell(r: Dict) -> str:
    """PPO's falls out of its seeds and tracking error, the paper's tracking after the slash."""
    if r.get("ppo_falls") is None:
        return f"- / {_num(r['paper_tracking_ppo_cm'], '.1f')}"
    return (f"{r['ppo_falls']}/{r['ppo_seeds']}, {r['ppo_tracking_cm']:.1f} / "
            f"{_num(r['paper_tracking_ppo_cm'], '.1f')}")


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def markdown(rows: Sequence[Dict], folder: Path, command: str) -> str:
    lines = ["# Sim-to-sim table: SHAC + BCG policies in MuJoCo", "", f"`{command}` (policies from `{folder}`)", "",
             "Falls out of the seeds (root below 0.3 m within the run), mean simulated time before the fall (the "
             "run's length when it stays up) [s], mean foot-penetration difference training simulator minus MuJoCo "
             "[mm], tracking error in MuJoCo (mean per-body position error, averaged up to the fall) [cm]; the "
             "paper's value after each slash. Without the drift: the same tracking error with each pose's "
             "horizontal root position removed (posture, height and heading; not how far the robot is from where "
             "the reference walked). From rest: the falls in MuJoCo when the robot starts standing still in the "
             "default pose where the reference starts, as the policy node starts it (`bcg-eval --from-rest`), "
             "instead of on the reference's first frame with its velocities. After a hold: the same, after "
             f"standing {HOLD_S:g} s unsupported under the policy's gains (`bcg-eval --from-rest --hold {HOLD_S:g}`), "
             "leaning and sagging as when the DDS check's band lets the robot go. Legs touching: the time per "
             "run in MuJoCo during which two of the robot's own bodies are in contact (the training simulator has "
             "no self-collision; `env.leg_clearance_penalty` keeps the legs apart). PPO: the PPO baseline's "
             "falls in MuJoCo and its tracking error (averaged up to its falls), where a `ppo_<motion>_k<kappa>.onnx` "
             "is present; how many environment steps each policy's own run took is listed below.", "",
             "| motion | kappa | falls | time up [s] | pen. diff [mm] | tracking SHAC+BCG [cm] | "
             "without the drift [cm] | PPO: falls, tracking [cm] | falls in Warp | falls from rest | "
             "falls after a hold | legs touching [s] |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    missing = []
    for r in rows:
        if not r["present"]:
            missing.append(r)
            continue
        lines.append(f"| {r['motion']} | {r['kappa']:g} | {r['falls']}/{r['seeds']} / {_num(r['paper_falls'], 'd')} | "
                     f"{r['time_up_s']:.1f} | "
                     f"{r['penetration_diff_mm']:.2f} / {_num(r['paper_penetration_mm'], '.1f')} | "
                     f"{r['tracking_cm']:.1f} / {_num(r['paper_tracking_shac_cm'], '.1f')} | "
                     f"{r['tracking_root_xy_cm']:.1f} | "
                     f"{_ppo_cell(r)} | "
                     f"{r['falls_warp']}/{r['seeds']} | {r['falls_from_rest']}/{r['seeds']} | "
                     f"{r['falls_after_hold']}/{r['seeds']} | {r['self_contact_s']:.2f} |")
    lines += ["", "## How each cell was produced", ""]
    for r in rows:
        if r["present"]:
            lines.append(f"- {r['motion']}, kappa {r['kappa']:g}: trained by {r['training']}; "
                         f"evaluated by `{r['eval_command']}`")
    ppo = [r for r in rows if r.get("ppo_falls") is not None]
    if ppo:
        lines += ["", "## The PPO baseline", ""]
        for r in ppo:
            lines.append(f"- {r['motion']}, kappa {r['kappa']:g}: up {r['ppo_time_up_s']:.1f} s on average; trained by "
                         f"{r['ppo_training']}; evaluated by `{r['ppo_eval_command']}`")
    if missing:
        lines += ["", "## Cells not run", ""]
        for r in missing:
            name = policy_name("shac", r["motion"], r["kappa"])
            lines.append(f"- {r['motion']}, kappa {r['kappa']:g}: no `{name}.onnx`; train with `bcg-train --preset "
                         f"transfer-cpu --motion {r['motion']} --kappa {r['kappa']:g} --run-dir runs/{name}` "
                         f"and export with `bcg-export runs/{name} -o {folder}/{name}.onnx`")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[Dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    present = [r for r in rows if r["present"]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{r['motion']}\nk{r['kappa']:g}" for r in present]
    x = range(len(present))
    axes[0].bar(x, [r["falls"] / r["seeds"] for r in present], label="ours")
    axes[0].plot(x, [(r["paper_falls"] or 0) / 5 for r in present], "k_", markersize=20, label="paper")
    axes[0].set(xticks=list(x), xticklabels=labels, ylabel="fall rate in MuJoCo", ylim=(0, 1.05))
    axes[0].legend()
    width = 0.4
    axes[1].bar([i - width / 2 for i in x], [r["tracking_cm"] for r in present], width, label="SHAC + BCG")
    axes[1].bar([i + width / 2 for i in x], [r.get("ppo_tracking_cm") or float("nan") for r in present], width,
                label="PPO (up to its falls)")
    axes[1].plot(x, [r["paper_tracking_shac_cm"] or float("nan") for r in present], "k_", markersize=20,
                 label="paper")
    axes[1].set(xticks=list(x), xticklabels=labels, ylabel="tracking error in MuJoCo [cm]")
    axes[1].legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    write_atomic(path, lambda f: f.write(buf.getvalue()))


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="bcg-table", description=__doc__.split("\n\n")[0])
    p.add_argument("policies", type=Path, help="folder of exported policies (shac_<motion>_k<kappa>.onnx, ...)")
    p.add_argument("--motions", default="run,jump,fight,dance")
    p.add_argument("--kappas", default="50,100,300")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--duration", type=float, default=15.0, help="seconds per run")
    p.add_argument("--out", type=Path, default=Path("out/table"))
    p.add_argument("--model", help="G1 MuJoCo XML (default: $BCG_G1_MODEL)")
    args = p.parse_args(argv)
    if not args.policies.is_dir():
        print(f"bcg-table: {args.policies}: no such folder", file=sys.stderr)
        return 2
    try:
        kappas = [float(k) for k in args.kappas.split(",")]
    except ValueError:
        print(f"bcg-table: --kappas {args.kappas!r}: expected numbers separated by commas", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        print(f"bcg-table: {line}", file=sys.stderr, flush=True)
    rows = rows_of(args.policies, args.motions.split(","), kappas, args.seeds, args.duration, args.model, log)
    command = "bcg-table " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(rows, args.policies, command)
    write_text_atomic(args.out / "table.md", text)
    buf = io.StringIO()
    fields = sorted({k for r in rows for k in r})
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(args.out / "table.csv", buf.getvalue())
    if any(r["present"] for r in rows):
        plot(rows, args.out / "table.png")
    print(text)
    return 0
