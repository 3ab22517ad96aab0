"""The simulator's two contact laws (`SimConfig.contact_model`) against MuJoCo: where the G1's feet rest
and how kappa moves it (bench/results/contact_models/README.md has the formulas and the reading).

Runs (the stand policy's PD gains holding the default pose, `bcg_train.diffsim.mujoco_reference`):
- starts: standing (feet on the floor, at rest), dropped from 5 mm and from 30 mm;
- MuJoCo at 1 kHz, and the simulator at kappa 50, 100, 300, 1000 in:
  speculative       the default model (speculative contact, stabilisation 0.2, Gauss-Seidel);
  paper             the paper's law (no bias, Jacobi, omega = contact_relaxation 0.25);
  paper omega W     the same with another Jacobi step (--relaxations);
  paper law, GS     the paper's law solved by Gauss-Seidel (speculative model with w = beta = 0): the
                    limit its Jacobi iterations approach when they converge.
Per run: the mean signed height of the spheres carrying load (negative: penetration) at 0.5, 1 and 2 s,
its lowest value, the pelvis height at the end, the spheres carrying load, and whether the robot fell
(pelvis below 0.3 m) or the state went non-finite.
Also: the share of the converged impulse that 10 iterations apply at a given smoothing s (all eight
spheres at s) on the G1 standing, for Gauss-Seidel and for Jacobi at each step (`impulse_share`).

    python bench/contact_models.py [--out bench/results/contact_models] [--relaxations 1,0.5,0.35]

Writes OUT/contact_models.json; prints the tables. About a minute on one CPU core.
"""
import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import warp as wp

from bcg.atomic_file import write_text_atomic
from bcg.contract.builtin import stand_gains
from bcg_train.diffsim import Model, NonFiniteStateError, SimConfig, Simulator, State
from bcg_train.diffsim import mujoco_reference as vd

wp.config.quiet = True
wp.config.log_level = wp.LOG_WARNING

KAPPAS = (50.0, 100.0, 300.0, 1000.0)
STARTS = {"stand": 0.0, "drop 5 mm": 0.005, "drop 30 mm": 0.030}   # feet clearance at release [m]
SAMPLE_S = (0.5, 1.0, 2.0)
FALL_HEIGHT = 0.3            # m, pelvis


def variants(relaxations: Sequence[float]) -> Dict[str, dict]:
    """Label -> SimConfig settings (besides kappa)."""
    out = {"speculative": {}, "paper": {"contact_model": "paper"}}
    out.update({f"paper omega {w:g}": {"contact_model": "paper", "contact_relaxation": w} for w in relaxations})
    out["paper law, GS"] = {"contact_speculative": 0.0, "contact_stabilization": 0.0}
    return out


def summarise(trace: vd.DropTrace, duration: float) -> dict:
    h = trace.contact_height
    at = {f"height_mm_{t:g}s": float(h[min(int(round(t / vd.CONTROL_DT)) - 1, len(h) - 1)] * 1000)
          for t in SAMPLE_S if t <= duration}
    return {**at, "lowest_height_mm": float(np.nanmin(h) * 1000), "pelvis_m": float(trace.base_height[-1]),
            "contacts": int(trace.num_contacts[-1]), "fell": bool(trace.base_height.min() < FALL_HEIGHT),
            "diverged": False}


def impulse_share(model: Model, relaxations: Sequence[float], smooths=(0.1, 0.3, 0.5, 0.7, 0.9, 1.0)) -> dict:
    """On the G1 standing (default pose, feet on the floor, stand gains): the normal impulse that 10
    iterations apply with every sphere's smoothing at s, over the converged one (Gauss-Seidel, 500 sweeps,
    s = 1): Gauss-Seidel, and Jacobi at each omega. NaN where an iteration overflows."""
    from bcg_train.diffsim.solvers.contact_jacobi import ContactJacobi
    from bcg_train.diffsim.solvers.contact_pgs import ContactPGS
    kp, kd = stand_gains(model.robot)
    sim = Simulator(model, 1, SimConfig(contact_model="paper"))
    sc = sim.physics.scratch(1, False)
    s_in = State.zeros(model, 1).assign(model.default_qpos(model.robot.standing_height)[None])
    ctrl = sim.control().set_pd(q_target=model.robot.default_q, kp=kp, kd=kd)
    sim.physics.dynamics(s_in, ctrl, 0.005, sc, None)
    sim.physics.contact(s_in, State.zeros(model, 1), 0.005, sc, None)
    g, v = sc.g, sc.v_free

    def applied(solver, s: float, omega: float = 0.25) -> float:
        cfg = SimConfig(contact_model="paper", contact_relaxation=omega)
        sub = Simulator(model, 1, cfg).physics
        smooth = wp.array(np.full((1, model.nc), s), dtype=wp.float64)
        impulse = wp.zeros((1, model.nc), dtype=wp.vec3d)
        solver.solve(sub.kernel_model, g, v, smooth, impulse, None)
        return float(impulse.numpy()[0, :, 0].sum())

    t = model.types
    exact = applied(ContactPGS(model.nc, 500, 1, "cpu", t), 1.0)
    rows = {"gauss-seidel": [applied(ContactPGS(model.nc, 10, 1, "cpu", t), s) / exact for s in smooths]}
    for w in sorted(set(relaxations) | {0.25}, reverse=True):
        rows[f"jacobi omega {w:g}"] = [applied(ContactJacobi(model.nc, 10, 1, "cpu", t), s, w) / exact for s in smooths]
    eig = np.linalg.eigvals(np.diag(1 / np.diag(g.numpy()[0])) @ g.numpy()[0]).real
    return {"smoothing": list(smooths), "share": rows, "largest_eigenvalue_of_diag_G_inv_G": float(eig.max())}


def run(duration: float, relaxations: Sequence[float], log=print) -> dict:
    model = Model.from_mujoco(device="cpu")
    out: Dict[str, dict] = {"duration_s": duration, "kappas": list(KAPPAS), "starts": {}}
    for start, clearance in STARTS.items():
        mj = vd.mujoco_drop(duration, model, clearance)
        rows: Dict[str, dict] = {"MuJoCo": summarise(mj, duration)}
        log(f"{start}: MuJoCo {fmt(rows['MuJoCo'])}")
        for label, settings in variants(relaxations).items():
            rows[label] = {}
            for kappa in KAPPAS:
                try:
                    trace = vd.warp_drop(SimConfig(kappa=kappa, **settings), duration, model, clearance)
                    row = summarise(trace, duration)
                except NonFiniteStateError:
                    row = {"diverged": True, "fell": True}
                rows[label][f"{kappa:g}"] = row
                log(f"{start}: {label:18s} kappa {kappa:6g}: {fmt(row)}")
        out["starts"][start] = rows
    out["impulse_share"] = impulse_share(model, relaxations)
    return out


def fmt(row: dict) -> str:
    if row.get("diverged"):
        return "non-finite state (diverged)"
    heights = " ".join(f"{row[k]:7.2f}" for k in row if k.startswith("height_mm_"))
    times = ", ".join(f"{t:g}" for t in SAMPLE_S)
    return (f"signed height at {times} s {heights} mm, lowest {row['lowest_height_mm']:7.2f}, "
            f"pelvis {row['pelvis_m']:.4f} m, {row['contacts']} loaded" + (", FELL" if row["fell"] else ""))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/contact_models"))
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per run")
    parser.add_argument("--relaxations", default="1,0.5,0.35", help="extra Jacobi steps omega of the paper's model")
    args = parser.parse_args(argv)
    result = run(args.duration, [float(w) for w in args.relaxations.split(",") if w])
    share = result["impulse_share"]
    print("impulse share after 10 iterations, all spheres at smoothing s =", share["smoothing"])
    for name, values in share["share"].items():
        print(f"  {name:18s} " + " ".join(f"{x:8.3f}" for x in values))
    print(f"  largest eigenvalue of diag(G)^-1 G: {share['largest_eigenvalue_of_diag_G_inv_G']:.2f}")
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out / "contact_models.json", json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out / 'contact_models.json'}")


if __name__ == "__main__":
    main()
