"""The bundling study's heavy tail, traced: which environment holds the variance of the bundled
gradient in the kappa-300 jump measurement (B = 10, 24 environments, seed 0: ratio 0.024), which of its
branches, what that branch does, and how the ratio moves with the noise seed
(bench/results/variance_outlier/README.md has the reading).

1. reproduce: `bcg_train.bundling_study` (the study's jump scenario, its policy, reward and window) at
   kappa 300 without bundling and with B = 10: the variance ratio, the environment with the largest
   share of sum_k Var_e[g_e,k] and the gradient norms.
2. trace: the same bundled window again with the bundler observed (its substep, re-run and entry-adjoint
   hooks wrapped, nothing else changed): the bundles that environment opened, the norm of each branch's
   entry-state adjoint (what the bundle's mean gradient averages), the distribution of max / median over
   all bundles of the window; then the top branch and its siblings replayed alone (a one-substep
   simulator from each branch's entry state under the recorded controls): sphere heights and impulses,
   leg joint velocities, the growth of the top singular value of d x_n / d x_entry (central differences
   per substep, chained), tape against central differences of the replayed map at eps 1e-3..1e-8, and a
   scan of the entry's pelvis height over +-100 um.
3. sweep (unless --no-sweep): the ratio, top share and 5 %-trimmed ratio for bundle seeds 0..S-1 at
   B = 4, 10, 20 and at B = 10 with branch_clip 5.

    python bench/variance_outlier.py [--out bench/results/variance_outlier] [--seeds 8] [--no-sweep]

Writes OUT/variance_outlier.json; prints what it finds. About 1 min without the sweep, 5 min with it
(2 shared CPU cores); the sweep holds about 5 GB.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Dict, List, Optional  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import warp as wp  # noqa: E402

from bcg.atomic_file import write_text_atomic  # noqa: E402
from bcg_train.bundling_study.scenarios import DEFAULT_BUNDLE, g1_model, scenario_factories, study_config  # noqa: E402
from bcg_train.bundling_study.statistics import sum_variance, trimmed_sum_variance  # noqa: E402
from bcg_train.bundling_study.window import StudyWindow  # noqa: E402
from bcg_train.diffsim import BundleExperiments, SimConfig, Simulator, Tape  # noqa: E402

wp.config.quiet = True
wp.config.log_level = wp.LOG_WARNING

KAPPA, ENVS, SEED = 300.0, 24, 0
H = 0.005                   # s, substep


def shares(g: np.ndarray) -> np.ndarray:
    """Each environment's share of sum_k Var_e[g_e,k] (its squared deviation from the mean)."""
    dev = np.square(g - g.mean(axis=0)).sum(axis=1)
    return dev / dev.sum()


def reproduce(scenario) -> dict:
    ref = StudyWindow(study_config(KAPPA, None), scenario).run()
    res = StudyWindow(study_config(KAPPA, DEFAULT_BUNDLE), scenario).run()
    g, g0 = res.param_grads, ref.param_grads
    share = shares(g)
    top = int(np.argmax(share))
    norms, norms0 = np.linalg.norm(g, axis=1), np.linalg.norm(g0, axis=1)
    steps = np.linalg.norm(res.action_grads[top], axis=1)
    return {"ratio": sum_variance(g0) / sum_variance(g), "var_no_bundle": sum_variance(g0),
            "var_bundle": sum_variance(g),
            "top_env": top, "top_share": float(share[top]), "second_share": float(np.sort(share)[-2]),
            "top_env_grad_norm_bundle": float(norms[top]), "top_env_grad_norm_no_bundle": float(norms0[top]),
            "median_grad_norm_bundle": float(np.median(norms)), "median_grad_norm_no_bundle": float(np.median(norms0)),
            "ratio_without_top_env": sum_variance(np.delete(g0, top, 0)) / sum_variance(np.delete(g, top, 0)),
            "top_env_action_grad_norm_per_step": steps.tolist(),
            "median_action_grad_norm_per_step": np.median(np.linalg.norm(res.action_grads, axis=2), axis=0).tolist()}


class Observer:
    """Wraps the bundler of a bundled StudyWindow to record, for environment `env`, each substep's input
    state and control; for every event, the substep, the environments that open bundles and the
    perturbations; and in the backward pass each new bundle's entry states and their adjoints."""

    def __init__(self, window: StudyWindow, env: int):
        b = window.sim.bundler
        self.env, self.substep, self.inputs, self.opened, self.entries = env, -1, {}, [], []
        self.rows_before: Dict[int, np.ndarray] = {}
        b.recorded = self.perturbations = []
        substep, rerun, record = b.substep, b._rerun, b._record_entry_adjoints

        def observed_substep(s_in, s_out, control, h, sites, tape, position, first):
            self.substep += 1
            i = self.substep
            self.rows_before[i] = np.repeat(b.bundle_env, b.counts)
            self.inputs[i] = (s_in.q.numpy()[env].copy(), s_in.qd.numpy()[env].copy(),
                              {n: getattr(control, n).numpy()[env].copy()
                               for n in ("q_target", "qd_target", "kp", "kd", "tau")})
            return substep(s_in, s_out, control, h, sites, tape, position, first)

        def observed_rerun(run_in, sc, env_row, new_src, new_legs, rerun_rows, rerun_legs, control, h, tape):
            br = b.stats.branches
            self.opened.append({"substep": self.substep, "envs": [int(e) for e in new_src[::br]],
                                "legs": new_legs[::br].tolist() if len(new_src) else [],
                                "rerun_rows": [int(r) for r in rerun_rows], "first_new_row": len(rerun_rows)})
            return rerun(run_in, sc, env_row, new_src, new_legs, rerun_rows, rerun_legs, control, h, tape)

        def observed_record(entry, first, bundles, br, tape, mix):
            record(entry, first, bundles, br, tape, mix)
            i = self.substep

            def grab():
                self.entries.append({"substep": i, "first": first, "bundles": bundles, "branches": br,
                                     "q_grad": entry.q.grad.numpy()[first:first + bundles * br].copy(),
                                     "qd_grad": entry.qd.grad.numpy()[first:first + bundles * br].copy()})
            tape.record_func(backward=grab, arrays=[])

        b.substep, b._rerun, b._record_entry_adjoints = observed_substep, observed_rerun, observed_record


def bundle_norms(obs: Observer) -> List[dict]:
    """Every bundle of the window: substep, environment, and its branches' entry-adjoint norms."""
    opened = {o["substep"]: o for o in obs.opened}
    out = []
    for e in obs.entries:
        envs = opened[e["substep"]]["envs"]
        for w, env in enumerate(envs):
            rows = slice(w * e["branches"], (w + 1) * e["branches"])
            n = np.sqrt(np.square(e["q_grad"][rows]).sum(1) + np.square(e["qd_grad"][rows]).sum(1))
            out.append({"substep": e["substep"], "env": env, "norms": n})
    return out


class Replay:
    """The branches of one bundle of the observed environment, replayed alone: a one-substep simulator
    (kappa 300) from each branch's entry state under the environment's recorded controls."""

    def __init__(self, obs: Observer, substep: int, branches: int):
        k = next(n for n, o in enumerate(obs.opened) if o["substep"] == substep and obs.env in o["envs"])
        event = obs.opened[k]
        dq, dqd = obs.perturbations[k]
        first = event["first_new_row"] + event["envs"].index(obs.env) * branches
        rows = np.arange(first, first + branches)
        q, qd, _ = obs.inputs[substep]
        self.model = g1_model()
        self.x0 = np.tile(np.concatenate([q, qd]), (branches, 1))
        self.x0[:, 7:self.model.nq] += dq[rows][:, 6:]       # hinge coordinates (perturbed_rows)
        self.x0[:, self.model.nq:] += dqd[rows]
        self.obs, self.start, self.legs = obs, substep, event["legs"][event["envs"].index(obs.env)]
        self._sims: Dict[int, Simulator] = {}

    def sim(self, rows: int, grad: bool = False) -> Simulator:
        key = rows * 2 + int(grad)
        if key not in self._sims:
            self._sims[key] = Simulator(self.model, rows, SimConfig(kappa=KAPPA, substeps=1), requires_grad=grad)
        return self._sims[key]

    def control(self, sim: Simulator, i: int, rows: int):
        c = self.obs.inputs[i][2]
        return sim.control().set_pd(**{n: np.tile(v, (rows, 1)) for n, v in c.items()})

    def run(self, x: np.ndarray, substeps: int):
        """States after `substeps` substeps from x (rows, nq + nv); returns (x_out, last state)."""
        nq, rows = self.model.nq, len(x)
        sim = self.sim(rows)
        s = sim.state().assign(x[:, :nq], x[:, nq:])
        for i in range(self.start, self.start + substeps):
            out = sim.state()
            sim.step(s, out, self.control(sim, i, rows), H)
            s = out
        return np.concatenate([s.q.numpy(), s.qd.numpy()], axis=1), s

    def tape_gradient(self, x: np.ndarray, w: np.ndarray, substeps: int) -> np.ndarray:
        """d (w . x_out) / d x, through the simulator's tape."""
        nq, rows = self.model.nq, len(x)
        sim = self.sim(rows, grad=True)
        s0 = sim.state().assign(x[:, :nq], x[:, nq:])
        tape = Tape()
        with tape:
            s = s0
            for i in range(self.start, self.start + substeps):
                out = sim.state()
                sim.step(s, out, self.control(sim, i, rows), H)
                s = out
        tape.backward(grads={s.q: wp.array(w[:, :nq], dtype=wp.float64), s.qd: wp.array(w[:, nq:], dtype=wp.float64)})
        g = np.concatenate([s0.q.grad.numpy(), s0.qd.grad.numpy()], axis=1)
        sim.segment.cut()
        return g

    def jacobian_growth(self, branch: int, substeps: int, eps: float = 1e-7) -> List[float]:
        """Top singular value of d x_(start + n) / d x_entry, n = 1..substeps (central differences)."""
        x = self.x0[branch].copy()
        dim = len(x)
        product, out = np.eye(dim), []
        for n in range(substeps):
            pert = np.tile(x, (2 * dim, 1))
            pert[:dim] += eps * np.eye(dim)
            pert[dim:] -= eps * np.eye(dim)
            sim = self.sim(2 * dim)
            s = sim.state().assign(pert[:, :self.model.nq], pert[:, self.model.nq:])
            o = sim.state()
            sim.step(s, o, self.control(sim, self.start + n, 2 * dim), H)
            y = np.concatenate([o.q.numpy(), o.qd.numpy()], axis=1)
            product = ((y[:dim] - y[dim:]) / (2 * eps)).T @ product
            out.append(float(np.linalg.svd(product, compute_uv=False)[0]))
            single = self.sim(1)
            s1 = single.state().assign(x[None, :self.model.nq], x[None, self.model.nq:])
            o1 = single.state()
            single.step(s1, o1, self.control(single, self.start + n, 1), H)
            x = np.concatenate([o1.q.numpy()[0], o1.qd.numpy()[0]])
        return out


def trace(scenario, env: int, branches: int) -> dict:
    window = StudyWindow(study_config(KAPPA, DEFAULT_BUNDLE), scenario)
    obs = Observer(window, env)
    res = window.run()
    bundles = bundle_norms(obs)
    ratios = np.array([b["norms"].max() / max(np.median(b["norms"]), 1e-300) for b in bundles])
    every = np.concatenate([b["norms"] for b in bundles])
    own = [b for b in bundles if b["env"] == env]
    worst = max(own, key=lambda b: b["norms"].max())
    top = int(np.argmax(worst["norms"]))
    span = DEFAULT_BUNDLE.span_steps * window.config.substeps
    start = worst["substep"]
    rows_in_bundle = [o for o in obs.opened if start < o["substep"] < start + span
                      and any(obs.rows_before[o["substep"]][r] == env for r in o["rerun_rows"])]
    out = {"grad_norm": float(np.linalg.norm(res.param_grads[env])),
           "bundles_of_env": [{"substep": b["substep"], "control_step": b["substep"] // window.config.substeps,
                               "legs_perturbed": next(o["legs"][o["envs"].index(env)] for o in obs.opened
                                                      if o["substep"] == b["substep"] and env in o["envs"]),
                               "entry_adjoint_norms": b["norms"].round(2).tolist()} for b in own],
           "window_bundles": len(bundles), "window_branches": int(every.size),
           "bundles_with_branch_above_x_median": {str(x): int((ratios > x).sum()) for x in (2, 5, 10, 100)},
           "largest_max_over_median": np.sort(ratios)[::-1][:6].round(1).tolist(),
           "branch_norm_over_window_median_quantiles_50_90_99_max": [
               *np.percentile(every / np.median(every), [50, 90, 99]).round(2).tolist(),
               round(float((every / np.median(every)).max()), 1)],
           "top_bundle_substep": start, "top_branch": top,
           "reperturbed_inside_top_bundle": len(rows_in_bundle)}
    rep = Replay(obs, start, branches)
    nq = rep.model.nq
    x1, s1 = rep.run(rep.x0, 1)
    x2, s2 = rep.run(rep.x0, 2)
    legs = slice(6, 18)       # the 12 leg joints' velocities (left hip pitch .. right ankle roll)
    out["replay"] = {
        "entry_joint_perturbation_max_rad": np.abs(rep.x0[:, 7:nq] - obs.inputs[start][0][7:]).max(1).round(3).tolist(),
        "heights_mm_after_1": (s1.contact_height.numpy() * 1000).round(2).tolist(),
        "normal_impulse_after_1": s1.contact_impulse.numpy()[:, :, 0].round(3).tolist(),
        "heights_mm_after_2": (s2.contact_height.numpy() * 1000).round(2).tolist(),
        "normal_impulse_after_2": s2.contact_impulse.numpy()[:, :, 0].round(3).tolist(),
        "leg_joint_velocity_entry": rep.x0[:, nq:][:, legs].round(2).tolist(),
        "leg_joint_velocity_after_1": x1[:, nq:][:, legs].round(2).tolist(),
        "leg_joint_velocity_after_2": x2[:, nq:][:, legs].round(2).tolist(),
        "pelvis_velocity_after_1": x1[:, nq:nq + 3].round(2).tolist()}
    growth = {}
    for b in sorted({top, (top + 1) % branches, (top + 2) % branches}):
        growth[str(b)] = [round(v) for v in rep.jacobian_growth(b, span)]
    out["replay"]["top_singular_value_of_d_x_n_d_x_entry"] = growth
    w = np.random.default_rng(0).normal(size=rep.x0.shape)
    g = rep.tape_gradient(rep.x0, w, span)
    gn = np.linalg.norm(g, axis=1)
    u = g / gn[:, None]
    fd = {}
    for eps in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
        plus = (rep.run(rep.x0 + eps * u, span)[0] * w).sum(1)
        minus = (rep.run(rep.x0 - eps * u, span)[0] * w).sum(1)
        fd[f"{eps:g}"] = ((plus - minus) / (2 * eps) / gn).round(3).tolist()
    out["replay"]["tape_gradient_norm_per_branch"] = gn.round(1).tolist()
    out["replay"]["fd_over_tape_per_branch"] = fd
    offsets = np.linspace(-1e-4, 1e-4, 21)
    x = np.repeat(rep.x0[top:top + 1], len(offsets), axis=0)
    x[:, 2] += offsets
    y, s = rep.run(x, 2)
    left = [k for k in range(rep.model.nc) if rep.model.sphere_leg.numpy()[k] == 0]
    out["replay"]["pelvis_height_scan"] = {
        "offset_um": (offsets * 1e6).round(1).tolist(),
        "left_knee_velocity": y[:, nq + 9].round(3).tolist(),
        "left_ankle_pitch_velocity": y[:, nq + 10].round(3).tolist(),
        "left_foot_normal_impulses": s.contact_impulse.numpy()[:, left, 0].round(3).tolist()}
    return out


def sweep(scenario, seeds: int, log) -> List[dict]:
    ref = StudyWindow(study_config(KAPPA, None), scenario).run()
    v0, t0 = sum_variance(ref.param_grads), trimmed_sum_variance(ref.param_grads)
    rows = []
    for label, change in (("B=4", {"branches": 4}), ("B=10", {}), ("B=20", {"branches": 20}),
                          ("B=10, branch_clip 5", {"experimental": BundleExperiments(branch_clip=5.0)})):
        cfg = replace(DEFAULT_BUNDLE, **change)
        window = StudyWindow(study_config(KAPPA, cfg), scenario)
        for seed in range(seeds):
            window.sim.bundler.cfg = replace(cfg, seed=seed)     # the noise stream's seed (read at each event)
            res = window.run()
            g = res.param_grads
            share = shares(g)
            row = {"config": label, "seed": seed, "ratio": v0 / sum_variance(g), "top_env": int(np.argmax(share)),
                   "top_share": float(share.max()), "ratio_trimmed": t0 / trimmed_sum_variance(g)}
            rows.append(row)
            log(f"  {label:20s} seed {seed}: ratio {row['ratio']:8.4g}  top env {row['top_env']:2d} "
                f"share {row['top_share']:.2f}  trimmed ratio {row['ratio_trimmed']:.2f}")
    return rows


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/variance_outlier"))
    parser.add_argument("--seeds", type=int, default=8, help="bundle seeds of the sweep")
    parser.add_argument("--no-sweep", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    scenario = scenario_factories(ENVS, SEED)["jump"](study_config(KAPPA, None))
    out = {"kappa": KAPPA, "envs": ENVS, "scenario": "jump", "bundle": "B = 10, H = 2, seed 0 (the study's default)"}
    out["reproduce"] = r = reproduce(scenario)
    print(f"ratio {r['ratio']:.4g}: env {r['top_env']} holds {r['top_share']:.1%} (next {r['second_share']:.1%}); "
          f"its gradient norm {r['top_env_grad_norm_bundle']:.1f} bundled, {r['top_env_grad_norm_no_bundle']:.1f} "
          f"plain (medians {r['median_grad_norm_bundle']:.2f}, {r['median_grad_norm_no_bundle']:.2f}); "
          f"ratio without it {r['ratio_without_top_env']:.3g}", flush=True)
    out["trace"] = t = trace(scenario, r["top_env"], DEFAULT_BUNDLE.branches)
    for b in t["bundles_of_env"]:
        print(f"  bundle at substep {b['substep']} (control step {b['control_step']}), legs {b['legs_perturbed']}: "
              f"entry adjoints {b['entry_adjoint_norms']}")
    print(f"  top branch {t['top_branch']} of the bundle at substep {t['top_bundle_substep']}; max/median over "
          f"{t['window_bundles']} bundles: {t['largest_max_over_median']}; growth "
          f"{t['replay']['top_singular_value_of_d_x_n_d_x_entry']}")
    print(f"  FD / tape: {json.dumps(t['replay']['fd_over_tape_per_branch'])}", flush=True)
    if not args.no_sweep:
        print("sweep over bundle seeds:", flush=True)
        out["sweep"] = sweep(scenario, args.seeds, lambda line: print(line, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out / "variance_outlier.json", json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out / 'variance_outlier.json'}")


if __name__ == "__main__":
    main()
