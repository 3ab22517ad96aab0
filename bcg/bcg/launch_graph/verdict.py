"""The mujoco_check evaluator: bridge metrics + policy-node events -> verdict JSON and a table.

Inputs: the bridge's metrics JSON (`bcg-sim-bridge --metrics`) and the node's JSON-lines event
log (`bcg-policy-node --events`). The verdict passes only when the policy ran and the robot stayed
up for the whole requested duration; exit code 0 then, 1 otherwise (2 when the events file is missing
or an input is malformed). The command rate is per simulated second: in lockstep one LowCmd answers each LowState;
in real time the node writes on its 500 Hz schedule and once more at each policy step (its targets go
out at once), which is why a real-time run reads above 500 Hz (500 + 50 while the policy runs).

Pacing: a lockstep run (simulated time on both sides) is judged whatever the machine's speed. A
real-time run is judged only at `REAL_TIME_MIN_FACTOR` of real time or faster; slower, the node's
clock (wall) and the simulation's parted, so the verdict says "not real time" (factor, pacing
slips) and does not judge the policy. A bridge that left no metrics (killed, crashed) is "the
simulator stopped": the node's events are reported, the policy is not judged.
"""
import json
from pathlib import Path
from typing import Any, Dict, Optional

from bcg.atomic_file import write_text_atomic

STOP_REASON_PREFIX = "stop requested"
"""Transitions to damping with this reason are the normal end of a run, not safety events."""
STALE_REASON_PREFIX = "LowState stale"
REAL_TIME_MIN_FACTOR = 0.9
"""Simulated s per wall s below which a real-time run is "not real time" (not judged)."""
END_OF_RUN_MARGIN_MS = 20
"""A stale-LowState event whose newest LowState is this close to the end of the simulation happened
because the bridge had finished (the launcher stops the node right after); not a safety event."""


class VerdictInputError(ValueError):
    """A metrics or events file is missing or malformed."""


def read_events(path: Path) -> Dict[str, Any]:
    """{'transitions': [...], 'summary': {...} or None} from the node's event log."""
    if not path.is_file():
        raise VerdictInputError(f"events file {path}: does not exist (did the policy node start?)")
    transitions, summary = [], None
    for k, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise VerdictInputError(f"events file {path}, line {k}: not JSON ({e})") from None
        if "transition" in rec:
            transitions.append(rec["transition"])
        elif "summary" in rec:
            summary = rec["summary"]
    return {"transitions": transitions, "summary": summary}


def evaluate(metrics: Dict[str, Any], events: Dict[str, Any], duration_s: float) -> Dict[str, Any]:
    """The verdict as a JSON-ready dict (lengths in mm, rates in Hz, times in s)."""
    try:
        ev, cmds = metrics["evaluation"], metrics["commands"]
        sim_time, wall = float(metrics["sim_time_s"]), float(metrics["wall_time_s"])
        fell = bool(ev["fell"])
    except (KeyError, TypeError, ValueError) as e:
        raise VerdictInputError(f"metrics: missing or malformed field {e}") from None
    def after_end(t):
        tick = t.get("state_tick_ms")
        return (str(t.get("reason", "")).startswith(STALE_REASON_PREFIX) and tick is not None
                and tick >= 1e3 * sim_time - END_OF_RUN_MARGIN_MS)
    safety = [t for t in events["transitions"] if t.get("to") == "damping" and not after_end(t)
              and not str(t.get("reason", "")).startswith(STOP_REASON_PREFIX)]
    ran_full = sim_time >= duration_s - 1e-3
    summary = events.get("summary") or {}
    policy_ran = bool(summary.get("policy_steps"))
    tracking = ev.get("tracking") if policy_ran else None
    per_s = (lambda n: n / sim_time) if sim_time > 0 else (lambda n: 0.0)
    written, woken = summary.get("commands_written", 0), summary.get("commands_woken", 0)
    lockstep = bool(metrics.get("lockstep")) and metrics["lockstep"].get("ended_at_s") is None
    rtf = sim_time / wall if wall > 0 else None
    pacing = pacing_of(lockstep, rtf)
    return {
        "passed": (not fell) and ran_full and policy_ran and pacing != NOT_REAL_TIME,
        "judged": pacing != NOT_REAL_TIME,
        "pacing": pacing,
        "simulator_stopped": False,
        "policy_ran": policy_ran,
        "lockstep": lockstep,
        "stayed_up": not fell,
        "fall_time_s": ev.get("fall_time_s"),
        "duration_s": duration_s,
        "sim_time_s": sim_time,
        "ran_full_duration": ran_full,
        "min_root_height_m": ev.get("min_root_height_m"),
        "foot_penetration_mean_mm": 1e3 * float(ev.get("foot_penetration_mean_m", 0.0)),
        "foot_penetration_max_mm": 1e3 * float(ev.get("foot_penetration_max_m", 0.0)),
        "tracking_error_rad": None if not tracking else tracking.get("mean_rms_error_rad"),
        "command_rate_hz": per_s(cmds.get("accepted", 0)),
        "command_rate_scheduled_hz": per_s(written - woken),
        "command_rate_at_once_hz": per_s(woken),
        "real_time_factor": rtf,
        "pacing_slips": metrics.get("pacing_slips", 0),
        "commands_accepted": cmds.get("accepted", 0),
        "commands_rejected": cmds.get("rejected_total", 0),
        "commands_rejected_by_reason": cmds.get("rejected", {}),
        "damping_fallbacks": cmds.get("damping_fallbacks", 0),
        "safety_events": safety,
        "phases": events["transitions"],
        "policy_steps": summary.get("policy_steps"),
        "start_deviation": summary.get("start_deviation"),
        "states_dropped_by_reason": summary.get("states_dropped"),
        "final_phase": summary.get("final_phase"),
        "elastic_band": metrics.get("elastic_band"),
    }


LOCKSTEP, REAL_TIME, NOT_REAL_TIME = "lockstep", "real time", "not real time"


def pacing_of(lockstep: bool, real_time_factor: Optional[float]) -> str:
    """How the run was paced: LOCKSTEP, REAL_TIME (at least REAL_TIME_MIN_FACTOR) or NOT_REAL_TIME."""
    if lockstep:
        return LOCKSTEP
    return REAL_TIME if real_time_factor is not None and real_time_factor >= REAL_TIME_MIN_FACTOR else NOT_REAL_TIME


def simulator_stopped(events: Dict[str, Any], duration_s: float, why: str) -> Dict[str, Any]:
    """The verdict of a run whose bridge left no metrics (`why`): not passed, the policy not judged."""
    summary = events.get("summary") or {}
    return {"passed": False, "judged": False, "pacing": None, "simulator_stopped": True,
            "simulator_stopped_why": why, "policy_ran": bool(summary.get("policy_steps")),
            "duration_s": duration_s, "policy_steps": summary.get("policy_steps"),
            "final_phase": summary.get("final_phase"), "phases": events["transitions"],
            "safety_events": [t for t in events["transitions"] if t.get("to") == "damping"
                              and not str(t.get("reason", "")).startswith(STOP_REASON_PREFIX)]}


def _pacing_text(v: Dict[str, Any]) -> str:
    rtf = "n/a" if v["real_time_factor"] is None else f"{v['real_time_factor']:.2f}"
    if v["pacing"] == LOCKSTEP:
        return f"lockstep (simulated time on both sides; {rtf}x real time, which cannot change the result)"
    return (f"{v['pacing']}: {rtf}x real time, {v['pacing_slips']} pacing slip(s)"
            + (f" (below {REAL_TIME_MIN_FACTOR}x: the node's wall clock and the simulation parted; "
               "the policy is not judged: rerun in lockstep or on an idle machine)"
               if v["pacing"] == NOT_REAL_TIME else ""))


def _verdict_text(v: Dict[str, Any]) -> str:
    if v["simulator_stopped"]:
        return "NO VERDICT: the simulator stopped before the end (the policy is not judged)"
    if not v["judged"]:
        return f"NO VERDICT: not real time ({v['real_time_factor']:.2f}x; the policy is not judged)"
    return ("PASS" if v["passed"] else "FAIL") + f" ({v['pacing']})"


def stopped_table(v: Dict[str, Any]) -> str:
    """The table of a `simulator_stopped` verdict."""
    rows = [("verdict", _verdict_text(v)), ("why", v["simulator_stopped_why"]),
            ("policy steps", f"{v['policy_steps'] or 0}"), ("node's final phase", str(v["final_phase"]))]
    rows += [(f"  node at sim {e['state_tick_ms'] / 1e3:.3f} s" if e.get("state_tick_ms") is not None else "  node",
              f"{e['from']} -> damping: {e['reason']}") for e in v["safety_events"]]
    width = max(len(r[0]) for r in rows)
    return "\n".join(["mujoco_check verdict", "-" * (width + 40)] + [f"{k:<{width}}  {val}" for k, val in rows])


def table(v: Dict[str, Any]) -> str:
    """The verdict as a human-readable table."""
    def fmt(x, unit="", digits=2):
        return "n/a" if x is None else f"{x:.{digits}f}{unit}"

    def by_reason(counts):
        named = ", ".join(f"{r} {n}" for r, n in (counts or {}).items() if n)
        return f" ({named})" if named else ""
    dropped = v["states_dropped_by_reason"]
    up = "yes" if v["stayed_up"] else f"NO, fell at {fmt(v['fall_time_s'], ' s')}"
    start = v["start_deviation"]
    rows = [
        ("verdict", _verdict_text(v)),
        ("stayed up", up),
        ("policy steps", f"{v['policy_steps'] or 0}" + ("" if v["policy_ran"] else ": the policy never ran")),
        ("policy's first observation", "n/a" if not start else
         f"{start['joint_pos_rad']:.3f} rad, {start['joint_vel_rad_s']:.3f} rad/s, tilt {start['tilt_deg']:.1f} deg "
         "from rest"),
        ("simulated time", f"{fmt(v['sim_time_s'], ' s')} of {fmt(v['duration_s'], ' s')}"),
        ("pacing", _pacing_text(v)),
        ("foot penetration mean / max", f"{fmt(v['foot_penetration_mean_mm'], ' mm')} / "
                                        f"{fmt(v['foot_penetration_max_mm'], ' mm')}"),
        ("tracking error (joint RMS)", fmt(v["tracking_error_rad"], " rad", 3) if v["tracking_error_rad"] is not None
         else "n/a (no motion)" if v["policy_ran"] else "n/a (the policy never ran)"),
        ("commands per simulated s", fmt(v["command_rate_hz"], " Hz", 1) + (
            " (one per LowState)" if v["lockstep"] else
            f" ({fmt(v['command_rate_scheduled_hz'], ' Hz', 1)} on the writer's schedule + "
            f"{fmt(v['command_rate_at_once_hz'], ' Hz', 1)} at once at policy steps)"
            if v["command_rate_scheduled_hz"] else "")),
        ("commands rejected", f"{v['commands_rejected']} of {v['commands_accepted'] + v['commands_rejected']}"
                              f"{by_reason(v['commands_rejected_by_reason'])}"),
        ("LowStates dropped by the node", "n/a" if dropped is None else f"{sum(dropped.values())}{by_reason(dropped)}"),
        ("safety events", str(len(v["safety_events"]))),
    ]
    rows += [(f"  at sim {fmt(None if e.get('state_tick_ms') is None else e['state_tick_ms'] / 1e3, ' s', 3)}",
              f"{e['from']} -> damping: {e['reason']}") for e in v["safety_events"]]
    width = max(len(r[0]) for r in rows)
    return "\n".join(["mujoco_check verdict", "-" * (width + 40)] + [f"{k:<{width}}  {val}" for k, val in rows])


def table_path(verdict_path: Path) -> Path:
    return verdict_path.with_suffix(".txt")


def run(metrics_path: str, events_path: str, verdict_path: str, duration_s: float,
        print_fn=print) -> int:
    """Write the verdict JSON and its table (next to it, .txt); print the table; return the exit code."""
    out = Path(verdict_path)
    try:
        events = read_events(Path(events_path))
        mpath = Path(metrics_path)
        if not mpath.is_file():
            verdict = simulator_stopped(events, duration_s, f"the bridge left no metrics ({mpath}): it was killed "
                                                            "or crashed (its log says which)")
        else:
            try:
                metrics = json.loads(mpath.read_text())
            except ValueError as e:
                raise VerdictInputError(f"metrics file {mpath}: not JSON ({e})") from None
            verdict = evaluate(metrics, events, duration_s)
    except VerdictInputError as e:
        print_fn(f"mujoco_check: cannot judge the run: {e}")
        return 2
    verdict["files"] = {"metrics": str(metrics_path), "events": str(events_path), "table": str(table_path(out))}
    text = stopped_table(verdict) if verdict["simulator_stopped"] else table(verdict)
    write_text_atomic(out, json.dumps(verdict, indent=2) + "\n")
    write_text_atomic(table_path(out), text + "\n")
    print_fn(text)
    return 0 if verdict["passed"] else 1


def main_args(parser) -> None:
    parser.add_argument("--metrics", required=True, help="bridge metrics JSON")
    parser.add_argument("--events", required=True, help="policy node events (JSON lines)")
    parser.add_argument("--verdict", required=True, help="verdict JSON to write")
    parser.add_argument("--duration", type=float, required=True, help="simulated seconds requested")
