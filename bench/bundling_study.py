"""Gradient-variance study of Bundled Contact Gradients on the G1 (issue 5, "The study") and the cost
of a bundled SHAC window.

Measure: sum_k Var_e[g_{e,k}] (unbiased, across environments e) of the SHAC actor-loss gradient
g_e = d loss_e / d(.), loss_e = -sum_{t<32} gamma^t r_{e,t} (gamma 0.99, no critic term: the
terminal value is a fixed zero), (a) with respect to the policy parameters and (b) with respect to
the actions a_{e,t} (32 x 29 per environment; total derivatives in the closed loop, as SHAC's
backward pass sees them). Every environment has its own copy of the policy's parameters (batched
weights, all copies equal at the start), so one backward of sum_e loss_e leaves env e's gradient in
param.grad[e]. Error bars: 95 % percentile intervals over bootstrap resamples of the environments;
the with/without ratio is bootstrapped on the same resamples (paired: same environments, initial
states and action noise in both).

Policy: MLP obs (66) -> 64 tanh -> 64 tanh -> 29, fixed random init (seed POLICY_SEED), output x 0.1 rad
= joint-target offsets added to the reference pose. Observation: joint position minus reference (29),
0.1 x joint velocity (29), 0.25 x base angular velocity in the base frame (3), projected gravity (3),
sin / cos of a 1 Hz clock of the reference time (2). Targets: reference joints at t + 1 + action
+ fixed action noise; PD gains 10 x kp, 3 x kd of the robot description. Reward (differentiable in the
simulated state): r = 0.5 exp(-2 |q_j - q_j,ref|^2) + 0.3 exp(-100 (z - z_ref)^2) + 0.2 exp(-10 (1 - u)),
z the pelvis height [m], u the world z component of the pelvis z axis.

Scenarios (E environments each, identical in the runs with and without bundling):
- stand: default pose settled for 1 s by the plain simulator at the kappa studied, reference = that
  pose; per-env action noise N(0, 0.05^2) rad per step and joint.
- jump: reference-state initialisation from the synthetic_jump clip 2..8 control steps (random per
  env) before the landing (falling at ~2.3 m/s), joints perturbed N(0, 0.02^2) rad, the same action
  noise; the window covers the landing and 0.5 s of recovery. Environments differ in phase.
- jump_tight: as jump but every env starts 5 steps before landing, joints perturbed N(0, 0.001^2) rad,
  no action noise: the variance left is the sensitivity of the landing itself.

Outputs (atomically) in --out: study.md, study.csv, variance_vs_kappa.png, variance_profile.png,
ablations.png, pointmass_curves.png, pointmass_bias_variance.png.

    python bench/bundling_study.py [--quick] [--out out/bundling_study]

Run time on 2 shared CPU cores: about 6 min in full (128 envs, 4 kappas, both ablation scenarios),
about 1.5 min with --quick (24 envs, kappa 50 and 300, ablations on jump only; same code paths).

Last line: variance_ratio_k300=<no-bundle over bundle, jump, parameters> window_cost_ratio=<bundled
over plain wall-clock of a 32-step window, jump, B = 10>.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable, Dict, List, Optional, Sequence, Tuple  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import warp as wp  # noqa: E402

import bundling_pointmass as pm  # noqa: E402  (sibling module: the 1-D case)
from bcg.atomic_file import write_atomic, write_text_atomic  # noqa: E402
from bcg_train.diffsim import BundleConfig, Model, SimConfig, Simulator  # noqa: E402
from bcg_train.diffsim.torch_bridge import step  # noqa: E402

wp.config.quiet = True
wp.config.log_level = wp.LOG_WARNING

DT = 0.02                   # s, control step
HORIZON = 32                # control steps of the SHAC window
GAMMA = 0.99
KAPPAS = (50.0, 100.0, 300.0, 1000.0)
ACTION_SCALE = 0.1          # rad per unit policy output
HIDDEN = 64
OBS_DIM = 66
POLICY_SEED = 7
KP_SCALE, KD_SCALE = 10.0, 3.0
STAND_HEIGHT = 0.757        # m, pelvis start of the stand settling
SETTLE_STEPS = 50           # control steps of the stand settling
ACTION_NOISE = 0.05         # rad
TRIM = 0.05                 # fraction of outlying environments dropped by the trimmed variance
DEFAULT_BUNDLE = BundleConfig(enabled=True, branches=10, span_steps=2, sigma_p=0.01, sigma_v=0.02,
                              threshold=400.0, nominal_forward=False, seed=0)
ABLATIONS = (("B=1", {"branches": 1}), ("B=4", {"branches": 4}), ("B=10 (default)", {}),
             ("B=20", {"branches": 20}), ("H=1", {"span_steps": 1}), ("H=4", {"span_steps": 4}),
             ("sigma_p=0.5cm", {"sigma_p": 0.005}), ("sigma_p=2cm", {"sigma_p": 0.02}),
             ("nominal-forward", {"nominal_forward": True}))


# -- scenarios -------------------------------------------------------------------------------------
@dataclass
class Scenario:
    """One batch of E environments over the window (T = HORIZON); joints in the description's order."""

    name: str
    q0: np.ndarray          # (E, nq) initial coordinates
    qd0: np.ndarray         # (E, nv) initial velocities
    ref_joint: np.ndarray   # (E, T + 1, nj) rad, reference joint positions at steps 0..T
    ref_height: np.ndarray  # (E, T + 1) m, reference pelvis height
    clock: np.ndarray       # (E, T + 1) s, reference time
    noise: np.ndarray       # (E, T, nj) rad, action noise added to the targets

    @property
    def envs(self) -> int:
        return self.q0.shape[0]


def pd_gains(model: Model) -> Tuple[torch.Tensor, torch.Tensor]:
    """(kp, kd) (nj,) of the standing-type PD: the description's gains x KP_SCALE, KD_SCALE."""
    return torch.tensor(model.robot.kp * KP_SCALE), torch.tensor(model.robot.kd * KD_SCALE)


def settled_stand(model: Model, config: SimConfig) -> Tuple[np.ndarray, np.ndarray]:
    """(q (nq,), qd (nv,)) after SETTLE_STEPS of PD on the default pose from STAND_HEIGHT, simulated
    (no gradients) with `config` (the plain one: bundling off)."""
    sim = Simulator(model, 1, config)
    kp, kd = pd_gains(model)
    s0, s1 = sim.state().assign(model.default_qpos(STAND_HEIGHT), np.zeros(model.nv)), sim.state()
    ctrl = sim.control().set_pd(q_target=model.robot.default_q, kp=kp.numpy(), kd=kd.numpy())
    for _ in range(SETTLE_STEPS):
        sim.step(s0, s1, ctrl, DT)
        s0, s1 = s1, s0
    return s0.q.numpy()[0], s0.qd.numpy()[0]


def stand_scenario(model: Model, config: SimConfig, envs: int, seed: int) -> Scenario:
    """The settled default pose (`config`: plain) for every env; per-env action noise N(0, ACTION_NOISE^2)."""
    q, qd = settled_stand(model, config)
    rng = np.random.default_rng(seed)
    t = HORIZON + 1
    return Scenario("stand", np.tile(q, (envs, 1)), np.tile(qd, (envs, 1)),
                    np.tile(model.robot.default_q, (envs, t, 1)), np.full((envs, t), q[2]),
                    np.tile(np.arange(t) * DT, (envs, 1)),
                    rng.normal(0.0, ACTION_NOISE, (envs, HORIZON, model.nj)))


def jump_clip(model: Model):
    """The synthetic_jump MotionClip at 50 Hz and its first landing frame."""
    from bcg_train.motion.kinematics import RobotKinematics
    from bcg_train.motion.library import load_clip
    kin = RobotKinematics(model.robot)
    clip = load_clip("synthetic_jump", kin)
    return clip, landing_frame(clip, kin)


def landing_frame(clip, kin) -> int:
    """First frame, after both feet were at least 3 cm up, where both foot bodies are back within 5 mm
    of their resting height (feet flat on the ground)."""
    cols = [clip.body_names.index(kin.model.body(b).name) for b in kin.foot_bodies.values()]
    lift = clip.body_pos[:, cols, 2] - kin.sole_height     # (T, 2) m
    airborne = np.flatnonzero(lift.min(axis=1) > 0.03)
    after = np.flatnonzero(lift.max(axis=1) < 0.005)
    return int(after[after > airborne[0]][0])


def jump_scenario(model: Model, clip, landing: int, envs: int, seed: int, tight: bool = False) -> Scenario:
    """Reference-state initialisation before the landing (see the module docstring for the two variants)."""
    rng = np.random.default_rng(seed)
    lead = np.full(envs, 5) if tight else rng.integers(2, 9, envs)      # control steps before landing
    start = landing - lead
    frames = start[:, None] + np.arange(HORIZON + 1)
    q_ref, qd_ref = clip.generalized()
    q0, qd0 = q_ref[start].copy(), qd_ref[start].copy()
    jq = model.joint_dof.numpy() + 1
    q0[:, jq] += rng.normal(0.0, 0.001 if tight else 0.02, (envs, model.nj))
    noise = np.zeros((envs, HORIZON, model.nj)) if tight else rng.normal(0.0, ACTION_NOISE, (envs, HORIZON, model.nj))
    return Scenario("jump_tight" if tight else "jump", q0, qd0, clip.joint_pos[frames], clip.root_pos[frames, 2],
                    frames / clip.fps, noise)


# -- policy, observation, reward -------------------------------------------------------------------
class PerEnvPolicy:
    """E copies of one MLP obs (OBS_DIM) -> HIDDEN tanh -> HIDDEN tanh -> nj, equal at the start (PyTorch's
    default uniform init from POLICY_SEED); copy e acts only in env e, so after a backward of
    sum_e loss_e, param.grad[e] = d loss_e / d theta_e."""

    def __init__(self, envs: int, act_dim: int, seed: int = POLICY_SEED):
        gen = torch.Generator().manual_seed(seed)
        sizes = (OBS_DIM, HIDDEN, HIDDEN, act_dim)
        self.params: List[torch.Tensor] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = fan_in ** -0.5
            for shape in ((fan_in, fan_out), (fan_out,)):
                one = (2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1) * bound
                self.params.append(one.expand(envs, *shape).clone().requires_grad_(True))

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """obs (E, OBS_DIM) -> raw outputs (E, act_dim)."""
        x = obs
        layers = len(self.params) // 2
        for i in range(layers):
            w, b = self.params[2 * i], self.params[2 * i + 1]
            x = torch.baddbmm(b.unsqueeze(1), x.unsqueeze(1), w).squeeze(1)
            if i < layers - 1:
                x = torch.tanh(x)
        return x

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def flat_grad(self) -> np.ndarray:
        """(E, P) per-environment parameter gradients."""
        return torch.cat([p.grad.reshape(p.shape[0], -1) for p in self.params], dim=1).numpy()


def body_up(quat: torch.Tensor) -> torch.Tensor:
    """(E, 3) world z axis in the base frame, i.e. minus the projected gravity, from quat (E, 4) w x y z."""
    w, x, y, z = quat.unbind(-1)
    return torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], dim=-1)


def observation(q: torch.Tensor, qd: torch.Tensor, ref_joint: torch.Tensor, clock: torch.Tensor,
                jq: torch.Tensor, jv: torch.Tensor) -> torch.Tensor:
    """(E, OBS_DIM) from q (E, nq), qd (E, nv), ref_joint (E, nj) rad, clock (E,) s; jq / jv: the joints'
    coordinate / velocity columns."""
    phase = 2 * np.pi * clock
    return torch.cat([q[:, jq] - ref_joint, 0.1 * qd[:, jv], 0.25 * qd[:, 3:6], -body_up(q[:, 3:7]),
                      torch.sin(phase)[:, None], torch.cos(phase)[:, None]], dim=1)


def reward(q: torch.Tensor, ref_joint: torch.Tensor, ref_height: torch.Tensor, jq: torch.Tensor) -> torch.Tensor:
    """(E,) tracking reward in [0, 1] (module docstring)."""
    pose = torch.exp(-2 * (q[:, jq] - ref_joint).square().sum(1))
    height = torch.exp(-100 * (q[:, 2] - ref_height).square())
    upright = torch.exp(-10 * (1 - body_up(q[:, 3:7])[:, 2]))
    return 0.5 * pose + 0.3 * height + 0.2 * upright


# -- one SHAC window -------------------------------------------------------------------------------
@dataclass
class WindowResult:
    param_grads: np.ndarray     # (E, P) d loss_e / d theta_e
    action_grads: np.ndarray    # (E, T, nj) d loss_e / d a_{e,t}
    loss: np.ndarray            # (E,)
    in_bundle: np.ndarray       # (T,) fraction of env-substeps of step t inside a bundle
    bundles: int                # bundles opened (0 without bundling)
    triggered_fraction: float   # env-substeps inside a bundle over all env-substeps
    branch_substeps: int
    env_substeps: int
    seconds: float              # wall-clock of the taped forward + backward

    def check_finite(self, what: str) -> None:
        for name in ("param_grads", "action_grads", "loss"):
            if not np.isfinite(getattr(self, name)).all():
                raise FloatingPointError(f"{what}: non-finite {name}")


class StudyWindow:
    """A simulator (grad mode) and a per-env policy for one scenario; `run` does one 32-step SHAC window
    from the scenario's initial states: taped forward through the torch bridge, then backward."""

    def __init__(self, config: SimConfig, scenario: Scenario):
        model = g1_model()
        self.model, self.config, self.scenario = model, config, scenario
        self.sim = Simulator(model, scenario.envs, config, requires_grad=True)
        self.policy = PerEnvPolicy(scenario.envs, model.nj)
        self.kp, self.kd = pd_gains(model)
        self.jq = torch.as_tensor(model.joint_dof.numpy() + 1)
        self.jv = torch.as_tensor(model.joint_dof.numpy())
        self.tensors = {name: torch.as_tensor(getattr(scenario, name), dtype=torch.float64)
                        for name in ("q0", "qd0", "ref_joint", "ref_height", "clock", "noise")}

    def run(self) -> WindowResult:
        """Bundles and counters start afresh; buffers of the previous run are reused."""
        sim, tn, envs = self.sim, self.tensors, self.scenario.envs
        sim.segment.cut()
        if sim.bundler is not None:
            sim.bundler.reset()
        self.policy.zero_grad()
        start = time.perf_counter()
        q, qd = tn["q0"], tn["qd0"]
        loss = torch.zeros(envs, dtype=torch.float64)
        actions, in_bundle = [], np.zeros(HORIZON)
        for t in range(HORIZON):
            obs = observation(q, qd, tn["ref_joint"][:, t], tn["clock"][:, t], self.jq, self.jv)
            a = ACTION_SCALE * self.policy(obs)
            a.retain_grad()
            actions.append(a)
            before = sim.bundle_stats.bundled_env_substeps if sim.bundler else 0
            q, qd = step(sim, q, qd, tn["ref_joint"][:, t + 1] + a + tn["noise"][:, t], DT, self.kp, self.kd)
            if sim.bundler:
                in_bundle[t] = (sim.bundle_stats.bundled_env_substeps - before) / (envs * self.config.substeps)
            loss = loss - GAMMA ** t * reward(q, tn["ref_joint"][:, t + 1], tn["ref_height"][:, t + 1], self.jq)
        loss.sum().backward()
        seconds = time.perf_counter() - start
        st = sim.bundle_stats
        return WindowResult(self.policy.flat_grad(), torch.stack([a.grad for a in actions], dim=1).numpy(),
                            loss.detach().numpy(), in_bundle, st.bundles if st else 0,
                            st.triggered_fraction if st else 0.0, st.branch_substeps if st else 0,
                            st.env_substeps if st else envs * HORIZON * self.config.substeps, seconds)


@functools.lru_cache(maxsize=None)
def g1_model() -> Model:
    """The G1 Model every run of the study shares (built once)."""
    return Model.from_mujoco(device="cpu")


def study_config(kappa: float, bundle: Optional[BundleConfig]) -> SimConfig:
    """The simulator settings at `kappa`, with `bundle` (None: bundling off)."""
    return SimConfig(kappa=kappa, bundle=bundle or BundleConfig())


# -- statistics ------------------------------------------------------------------------------------
def sum_variance(g: np.ndarray) -> float:
    """sum_k Var_e[g_{e,k}] of g (E, K...), unbiased across environments (axis 0)."""
    g = g.reshape(len(g), -1)
    return float(g.var(axis=0, ddof=1).sum())


def bootstrap_sum_variance(g: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """sum_k Var_e of g (E, K...) over each bootstrap resample of the environments, given as counts
    (R, E) (how often each env is drawn; E draws): (R,). Exact, in one matrix product."""
    g = g.reshape(len(g), -1)
    g = g - g.mean(axis=0)                       # variance is shift-invariant; less cancellation
    e = g.shape[0]
    mean = counts @ g / e                        # (R, K) resample means
    second = counts @ np.square(g).sum(axis=1) / e
    return (second - np.square(mean).sum(axis=1)) * e / (e - 1)


def resample_counts(envs: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, envs) draw counts of bootstrap resamples (envs draws with replacement each)."""
    idx = rng.integers(0, envs, (resamples, envs))
    return np.stack([np.bincount(row, minlength=envs) for row in idx]).astype(np.float64)


def interval(samples: np.ndarray) -> Tuple[float, float]:
    """95 % percentile interval of bootstrap samples."""
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return float(lo), float(hi)


def trimmed_sum_variance(g: np.ndarray, fraction: float = TRIM) -> float:
    """sum_k Var_e over the environments left after dropping the ceil(fraction E) farthest (L2) from the
    coordinate-wise median gradient: the variance of the typical environments, without the outliers."""
    g = g.reshape(len(g), -1)
    dist = np.square(g - np.median(g, axis=0)).sum(axis=1)
    keep = np.argsort(dist)[:len(g) - int(np.ceil(fraction * len(g)))]
    return sum_variance(g[keep])


def top_env_share(g: np.ndarray) -> float:
    """Share of sum_k Var_e[g_{e,k}] contributed by the single most deviant environment."""
    g = g.reshape(len(g), -1)
    dev = np.square(g - g.mean(axis=0)).sum(axis=1)
    return float(dev.max() / dev.sum())


@dataclass
class VarianceRow:
    """One (scenario, kappa, configuration) measurement; *_lo / *_hi: 95 % bootstrap interval; ratios:
    no-bundle variance over this configuration's, bootstrapped on the same resamples."""

    table: str
    scenario: str
    kappa: float
    config: str
    envs: int
    var_params: float
    var_params_lo: float
    var_params_hi: float
    var_actions: float
    var_actions_lo: float
    var_actions_hi: float
    ratio_params: float
    ratio_params_lo: float
    ratio_params_hi: float
    ratio_actions: float
    ratio_actions_lo: float
    ratio_actions_hi: float
    top_env_share_params: float
    var_params_trimmed: float
    ratio_params_trimmed: float
    mean_loss: float
    bundles: int
    triggered_fraction: float
    branch_substeps: int
    env_substeps: int
    seconds: float


def variance_row(table: str, scenario: str, kappa: float, config: str, res: WindowResult, ref: WindowResult,
                 counts: np.ndarray) -> VarianceRow:
    """The row of `res`, with ratios against `ref` (the no-bundle run on the same environments)."""
    out = {}
    for kind in ("params", "actions"):
        g, g_ref = getattr(res, f"{kind[:-1]}_grads"), getattr(ref, f"{kind[:-1]}_grads")
        boot, boot_ref = bootstrap_sum_variance(g, counts), bootstrap_sum_variance(g_ref, counts)
        out[f"var_{kind}"] = sum_variance(g)
        out[f"var_{kind}_lo"], out[f"var_{kind}_hi"] = interval(boot)
        out[f"ratio_{kind}"] = sum_variance(g_ref) / out[f"var_{kind}"]
        out[f"ratio_{kind}_lo"], out[f"ratio_{kind}_hi"] = interval(boot_ref / boot)
    trimmed = trimmed_sum_variance(res.param_grads)
    return VarianceRow(table, scenario, kappa, config, len(res.loss),
                       top_env_share_params=top_env_share(res.param_grads),
                       var_params_trimmed=trimmed, ratio_params_trimmed=trimmed_sum_variance(ref.param_grads) / trimmed,
                       mean_loss=float(res.loss.mean()),
                       bundles=res.bundles, triggered_fraction=res.triggered_fraction,
                       branch_substeps=res.branch_substeps, env_substeps=res.env_substeps, seconds=res.seconds, **out)


@dataclass
class StepProfile:
    """Where in the window the action-gradient variance sits: per step t, sum over joints of
    Var_e[d loss_e / d a_{e,t,j}] (T,), and the fraction of env-substeps inside a bundle (T,)."""

    scenario: str
    kappa: float
    config: str
    variance: np.ndarray
    in_bundle: np.ndarray


def step_profile(scenario: str, kappa: float, config: str, res: WindowResult) -> StepProfile:
    return StepProfile(scenario, kappa, config, res.action_grads.var(axis=0, ddof=1).sum(axis=1), res.in_bundle)


# -- the study -------------------------------------------------------------------------------------
ScenarioFactory = Callable[[SimConfig], Scenario]


def compare(table: str, kappa: float, make_scenario: ScenarioFactory, configs: Sequence[Tuple[str, BundleConfig]],
            counts: np.ndarray, log: Callable[[str], None]) -> Tuple[List[VarianceRow], List[StepProfile]]:
    """No bundling and each bundled configuration on the same scenario (same envs, states, noise)."""
    plain = study_config(kappa, None)
    scenario = make_scenario(plain)
    ref = StudyWindow(plain, scenario).run()
    ref.check_finite(f"{scenario.name} kappa {kappa:g} no bundle")
    rows = [variance_row(table, scenario.name, kappa, "no bundle", ref, ref, counts)]
    profiles = [step_profile(scenario.name, kappa, "no bundle", ref)]
    for name, cfg in configs:
        res = StudyWindow(study_config(kappa, cfg), scenario).run()
        res.check_finite(f"{scenario.name} kappa {kappa:g} {name}")
        rows.append(variance_row(table, scenario.name, kappa, name, res, ref, counts))
        profiles.append(step_profile(scenario.name, kappa, name, res))
    for r in rows:
        log(f"  {r.table:8s} {r.scenario:10s} kappa {r.kappa:6g} {r.config:16s} var_params {r.var_params:10.4g} "
            f"var_actions {r.var_actions:10.4g} ratio {r.ratio_params:7.3g} bundles {r.bundles:4d} "
            f"triggered {r.triggered_fraction:.3f} ({r.seconds:.1f} s)")
    return rows, profiles


@dataclass
class CostRow:
    """Median wall-clock [s] of the taped 32-step window plus its backward, with and without bundling."""

    scenario: str
    kappa: float
    envs: int
    repeats: int
    plain_median_s: float
    bundle_median_s: float
    ratio: float
    row_floor: float        # 1 + branch_substeps / env_substeps: the ratio if cost were proportional to rows
    triggered_fraction: float
    bundles: int
    branch_substeps: int
    env_substeps: int


def window_cost(scenario: Scenario, kappa: float, repeats: int) -> CostRow:
    """Bundling (DEFAULT_BUNDLE) against none, runs interleaved after one warm-up of each; counters of
    the last bundled run."""
    plain = StudyWindow(study_config(kappa, None), scenario)
    bundled = StudyWindow(study_config(kappa, DEFAULT_BUNDLE), scenario)
    plain.run(), bundled.run()
    times = {"plain": [], "bundle": []}
    for _ in range(repeats):
        times["plain"].append(plain.run().seconds)
        last = bundled.run()
        times["bundle"].append(last.seconds)
    p, b = float(np.median(times["plain"])), float(np.median(times["bundle"]))
    floor = 1 + last.branch_substeps / last.env_substeps
    return CostRow(scenario.name, kappa, scenario.envs, repeats, p, b, b / p, floor, last.triggered_fraction,
                   last.bundles, last.branch_substeps, last.env_substeps)


@dataclass
class StudySettings:
    envs: int
    kappas: Sequence[float]
    bootstrap: int
    ablation_scenarios: Sequence[str]
    cost_envs: int
    cost_repeats: int
    pointmass_repeats: int
    pointmass_envs: int
    seed: int = 0


FULL = StudySettings(envs=128, kappas=KAPPAS, bootstrap=2000, ablation_scenarios=("jump", "jump_tight"), cost_envs=64,
                     cost_repeats=5, pointmass_repeats=2000, pointmass_envs=4000)
QUICK = StudySettings(envs=24, kappas=(50.0, 300.0), bootstrap=300, ablation_scenarios=("jump",), cost_envs=64,
                      cost_repeats=3, pointmass_repeats=300, pointmass_envs=1000)


def scenario_factories(envs: int, seed: int) -> Dict[str, ScenarioFactory]:
    """name -> (plain simulator settings -> Scenario); the jump clip is synthesised once."""
    cache = {}
    model = g1_model()

    def jump(tight):
        if "clip" not in cache:
            cache["clip"] = jump_clip(model)
        return jump_scenario(model, *cache["clip"], envs, seed, tight)
    return {"stand": lambda config: stand_scenario(model, config, envs, seed),
            "jump": lambda config: jump(False),
            "jump_tight": lambda config: jump(True)}


@dataclass
class StudyResults:
    settings: StudySettings
    main: List[VarianceRow]
    ablation: List[VarianceRow]
    profiles: List[StepProfile]
    pointmass: Dict
    cost: List[CostRow]
    seconds: float


def run_study(settings: StudySettings, log: Callable[[str], None] = print) -> StudyResults:
    """Variance rows (main and ablations), per-step profiles, the 1-D case and the window cost."""
    start = time.perf_counter()
    rng = np.random.default_rng(settings.seed)
    counts = resample_counts(settings.envs, settings.bootstrap, rng)
    factories = scenario_factories(settings.envs, settings.seed)
    main, ablation, profiles = [], [], []
    log("variance against kappa")
    for make in factories.values():
        for kappa in settings.kappas:
            rows, prof = compare("main", kappa, make, [("bundle", DEFAULT_BUNDLE)], counts, log)
            main += rows
            profiles += prof
    log("ablations at kappa 300")
    configs = [(label, replace(DEFAULT_BUNDLE, **change)) for label, change in ABLATIONS]
    for name in settings.ablation_scenarios:
        ablation += compare("ablation", 300.0, factories[name], configs, counts, log)[0]
    log("1-D point mass")
    pointmass = run_pointmass(settings, rng)
    log("window cost at kappa 300")
    cost_factories = scenario_factories(settings.cost_envs, settings.seed)
    plain = study_config(300.0, None)
    cost = [window_cost(cost_factories[name](plain), 300.0, settings.cost_repeats) for name in ("jump", "stand")]
    for c in cost:
        log(f"  {c.scenario}: plain {c.plain_median_s:.2f} s, bundle {c.bundle_median_s:.2f} s, ratio {c.ratio:.2f}, "
            f"triggered {c.triggered_fraction:.3f}, branch substeps {c.branch_substeps}")
    return StudyResults(settings, main, ablation, profiles, pointmass, cost, time.perf_counter() - start)


def run_pointmass(settings: StudySettings, rng: np.random.Generator) -> Dict:
    """Dense curves, bias / variance against B and the across-heights variance for kappa 50, 300, 1000."""
    curves = [pm.dense_curves(k) for k in (50.0, 300.0, 1000.0)]
    rows = [r for c in curves for r in pm.bias_variance_rows(c, settings.pointmass_repeats, rng)]
    across = [pm.across_heights_variance(c, settings.pointmass_envs, rng) for c in curves]
    return {"curves": curves, "bias_variance": rows, "across": across}


# -- report ----------------------------------------------------------------------------------------
def save_figure(fig, path: Path) -> None:
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, lambda f: f.write(buf.getvalue()))


def csv_bytes(results: StudyResults) -> bytes:
    """One long table: every variance row, cost row, 1-D bias/variance and across-heights row, with a
    `table` column; fields that do not apply are empty."""
    rows = [asdict(r) for r in results.main + results.ablation]
    rows += [{"table": "cost", **asdict(c)} for c in results.cost]
    rows += [{"table": "pointmass_bias_variance", **r} for r in results.pointmass["bias_variance"]]
    rows += [{"table": "pointmass_across_heights", **r} for r in results.pointmass["across"]]
    header = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue().encode()


def ci(value: float, lo: float, hi: float) -> str:
    return f"{value:.3g} [{lo:.3g}, {hi:.3g}]"


def variance_table(rows: Sequence[VarianceRow], first: str) -> List[str]:
    lines = [f"| {first} | var params [95% CI] | var actions [95% CI] | ratio params | ratio actions | bundles | "
             "triggered | top env share | var params, trimmed (ratio) | mean loss |", "|---" * 10 + "|"]
    for r in rows:
        label = r.config if first == "config" else f"{r.scenario}, k={r.kappa:g}, {r.config}"
        lines.append(f"| {label} | {ci(r.var_params, r.var_params_lo, r.var_params_hi)} | "
                     f"{ci(r.var_actions, r.var_actions_lo, r.var_actions_hi)} | "
                     f"{ci(r.ratio_params, r.ratio_params_lo, r.ratio_params_hi)} | "
                     f"{ci(r.ratio_actions, r.ratio_actions_lo, r.ratio_actions_hi)} | {r.bundles} | "
                     f"{r.triggered_fraction:.3f} | {r.top_env_share_params:.2f} | "
                     f"{r.var_params_trimmed:.3g} ({r.ratio_params_trimmed:.3g}) | {r.mean_loss:.2f} |")
    return lines


def goal_row(results: StudyResults, scenario: str = "jump") -> VarianceRow:
    """The kappa-300 bundled row of `scenario` in the main table (the goal's measure)."""
    return next(r for r in results.main if r.scenario == scenario and r.kappa == 300.0 and r.config == "bundle")


def markdown(results: StudyResults, command: str) -> str:
    s, pmr = results.settings, results.pointmass
    goal = goal_row(results)
    out = [
        "# Bundled Contact Gradients: gradient-variance study and window cost (issue 5)", "",
        f"Written by `{command}` in {results.seconds / 60:.1f} min (CPU, Warp + torch float64). "
        f"{s.envs} environments per G1 run, {s.bootstrap} bootstrap resamples, seed {s.seed}. "
        "Definitions (policy, observation, reward, scenarios) are in the docstring of bench/bundling_study.py.", "",
        "Measure: sum_k Var_e[g_e,k] (unbiased, across environments) of the SHAC actor-loss gradient, "
        f"loss_e = -sum_(t<{HORIZON}) {GAMMA}^t r_e,t with a fixed zero terminal value (no critic), with respect to "
        "the policy parameters (per-env copies of a 66-64-64-29 tanh MLP, 10 333 parameters) and to the actions "
        f"({HORIZON} x 29 joint-target offsets). Brackets: 95 % bootstrap intervals over the environments; "
        "ratio = no-bundle variance over the row's (same environments, initial states and action noise; paired "
        "resamples). Bundling: B = 10, H = 2, sigma_p = 1 cm, sigma_v = 2 cm/s, threshold 400 N, mean-forward. "
        "'top env share': fraction of the parameter variance from the single most deviant environment; "
        f"'trimmed': the parameter variance without the {TRIM:.0%} of environments farthest from the median "
        "gradient (the typical environments; ratio: no-bundle trimmed over the row's trimmed).", "",
        "## Variance against kappa", ""]
    out += variance_table(results.main, "scenario, kappa, config")
    out += ["", f"**Goal (kappa 300, jump, parameters): no-bundle over bundle = {goal.ratio_params:.3g} "
            f"[{goal.ratio_params_lo:.3g}, {goal.ratio_params_hi:.3g}]; goal >= 10 (met when the interval's lower end "
            f"is): {'met' if goal.ratio_params_lo >= 10 else 'not met'}.**", ""]
    stand = [r for r in results.main if r.scenario == "stand" and r.config == "bundle"]
    out += ["Stand bundles opened per kappa (bundled runs): "
            + ", ".join(f"k={r.kappa:g}: {r.bundles} (triggered {r.triggered_fraction:.3f})" for r in stand) + ".", ""]
    out += ["Per-step action-gradient variance (sum over joints) and the fraction of env-substeps in a bundle: "
            "`variance_profile.png`; variance against kappa: `variance_vs_kappa.png`.", ""]
    for name in s.ablation_scenarios:
        out += [f"## Ablations at kappa 300, {name}", ""]
        out += variance_table([r for r in results.ablation if r.scenario == name], "config")
        out += [""]
    out += ["## 1-D point mass on the same contact model", "",
            f"Loss v_T after {pm.STEPS} control steps (dt {pm.DT} s, {pm.SUBSTEPS} substeps, {pm.ITERATIONS} projected "
            f"iterations) from height z0 falling at {-pm.V0:g} m/s; bundled estimate = mean of B raw gradients at "
            f"z0 + N(0, {pm.SIGMA * 100:g} cm^2); exact smoothed gradient by quadrature on a 9001-point grid "
            "(`pointmass_curves.png`). At z* = argmax |smoothed gradient|, over "
            f"{s.pointmass_repeats} repeats (`pointmass_bias_variance.png`):", "",
            "| kappa | B | z* [m] | raw grad | smoothed grad | bias of the mean [+- s.e.] | variance | B x variance |",
            "|---" * 8 + "|"]
    for r in pmr["bias_variance"]:
        out.append(f"| {r['kappa']:g} | {r['B']} | {r['z_star']:.4f} | {r['raw_grad']:.4g} | "
                   f"{r['smoothed_grad']:.4g} | "
                   f"{r['bias']:.3g} +- {r['bias_stderr']:.2g} | {r['variance']:.4g} | {r['B_times_variance']:.4g} |")
    check = max(float(np.nanmax(np.abs(c.smoothed - c.smoothed_from_f))) for c in pmr["curves"])
    out += ["", f"Check: E[f'(z + w)] against d/dz E[f(z + w)] on the grid: max difference {check:.2g} 1/s.", "",
            "Across 'environments' z0 ~ U(0.3, 0.5) m (the G1 measure in 1-D), B = 10:", "",
            "| kappa | envs | var raw | var bundled | var of exact smoothed (floor) | ratio | ratio as B -> inf |",
            "|---" * 7 + "|"]
    for r in pmr["across"]:
        out.append(f"| {r['kappa']:g} | {r['envs']} | {r['var_raw']:.4g} | {r['var_bundled']:.4g} | "
                   f"{r['var_smoothed']:.4g} | {r['ratio']:.3g} | {r['ratio_limit']:.3g} |")
    out += ["", "## Cost of a 32-step SHAC window (kappa 300, B = 10)", "",
            "Taped forward through the torch bridge + backward, same policy and scenario, runs interleaved after a "
            "warm-up; median wall-clock.", "",
            "'row floor' = 1 + branch substeps / env substeps, the ratio if the cost were proportional to the rows "
            "simulated.", "",
            "| scenario | envs | repeats | plain [s] | bundled [s] | ratio (goal <= 1.5) | row floor | triggered | "
            "bundles | branch substeps | env substeps |", "|---" * 11 + "|"]
    for c in results.cost:
        out.append(f"| {c.scenario} | {c.envs} | {c.repeats} | {c.plain_median_s:.3f} | {c.bundle_median_s:.3f} | "
                   f"{c.ratio:.2f} | {c.row_floor:.2f} | {c.triggered_fraction:.3f} | {c.bundles} | "
                   f"{c.branch_substeps} | {c.env_substeps} |")
    return "\n".join(out) + "\n"


def plot_variance(results: StudyResults, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r.scenario for r in results.main))
    fig, axes = plt.subplots(2, len(names), figsize=(4.2 * len(names), 7), squeeze=False, constrained_layout=True)
    for j, name in enumerate(names):
        for i, kind in enumerate(("params", "actions")):
            ax = axes[i, j]
            for config, marker in (("no bundle", "o"), ("bundle", "s")):
                rows = [r for r in results.main if r.scenario == name and r.config == config]
                k = np.array([r.kappa for r in rows]) * (1.04 if config == "bundle" else 1.0)
                v = np.array([getattr(r, f"var_{kind}") for r in rows])
                err = np.array([[v_ - getattr(r, f"var_{kind}_lo"), getattr(r, f"var_{kind}_hi") - v_]
                                for r, v_ in zip(rows, v)]).T
                ax.errorbar(k, v, yerr=err, marker=marker, capsize=3, label=config)
            ax.set(xscale="log", yscale="log", xlabel="kappa [1/m]", title=f"{name}: w.r.t. {kind}",
                   ylabel="sum_k Var_e[g_k]")
            ax.legend()
    save_figure(fig, path)


def plot_profiles(results: StudyResults, path: Path) -> None:
    import matplotlib.pyplot as plt
    keys = sorted({(p.scenario, p.kappa) for p in results.profiles if p.kappa == 300.0})
    fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 3.8), squeeze=False, constrained_layout=True)
    for ax, (name, kappa) in zip(axes[0], keys):
        twin = ax.twinx()
        for p in results.profiles:
            if (p.scenario, p.kappa) == (name, kappa):
                ax.plot(p.variance, label=p.config)
                if p.config == "bundle":
                    twin.fill_between(np.arange(HORIZON), p.in_bundle, color="grey", alpha=0.25, step="mid")
        twin.set(ylim=(0, 1), ylabel="fraction in a bundle (grey)")
        ax.set(yscale="log", xlabel="control step t", ylabel="sum_j Var_e[dL/da_t,j]", title=f"{name}, kappa {kappa:g}")
        ax.legend()
    save_figure(fig, path)


def plot_ablations(results: StudyResults, path: Path) -> None:
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r.scenario for r in results.ablation))
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        rows = [r for r in results.ablation if r.scenario == name]
        x = np.arange(len(rows))
        for off, kind in ((-0.2, "params"), (0.2, "actions")):
            v = np.array([getattr(r, f"ratio_{kind}") for r in rows])
            err = np.array([[v_ - getattr(r, f"ratio_{kind}_lo"), getattr(r, f"ratio_{kind}_hi") - v_]
                            for r, v_ in zip(rows, v)]).T
            ax.bar(x + off, v, 0.4, yerr=err, capsize=3, label=kind)
        ax.axhline(10.0, color="k", ls="--", lw=0.8)
        ax.set(yscale="log", xticks=x, ylabel="no-bundle var / var", title=f"ablations, {name}, kappa 300")
        ax.set_xticklabels([r.config for r in rows], rotation=45, ha="right")
        ax.legend()
    save_figure(fig, path)


def plot_pointmass(results: StudyResults, curves_path: Path, bv_path: Path) -> None:
    import matplotlib.pyplot as plt
    curves = results.pointmass["curves"]
    fig, axes = plt.subplots(2, len(curves), figsize=(4.5 * len(curves), 6.5), squeeze=False)
    for j, c in enumerate(curves):
        axes[0, j].plot(c.z0, c.f)
        axes[0, j].set(title=f"kappa {c.kappa:g}", xlabel="z0 [m]", ylabel="f = v_T [m/s]")
        z_star = c.z0[np.nanargmax(np.abs(c.smoothed))]
        axes[1, j].plot(c.z0, c.raw, lw=0.8, label="raw df/dz0")
        axes[1, j].plot(c.z0, c.smoothed, lw=1.6, label=f"smoothed (sigma {pm.SIGMA * 100:g} cm)")
        axes[1, j].set(xlabel="z0 [m]", ylabel="gradient [1/s]", xlim=(z_star - 0.1, z_star + 0.1),
                       title="gradient (zoomed on the landing)")
        axes[1, j].legend()
    save_figure(fig, curves_path)
    rows = results.pointmass["bias_variance"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for kappa in dict.fromkeys(r["kappa"] for r in rows):
        sel = [r for r in rows if r["kappa"] == kappa]
        b = np.array([r["B"] for r in sel])
        axes[0].errorbar(b, [abs(r["bias"]) for r in sel], yerr=[2 * r["bias_stderr"] for r in sel], marker="o",
                         capsize=3, label=f"kappa {kappa:g}")
        axes[1].plot(b, [r["variance"] for r in sel], marker="o", label=f"kappa {kappa:g}")
        axes[1].plot(b, sel[0]["variance"] / b, "k:", lw=0.8)
    axes[0].set(xscale="log", yscale="symlog", xlabel="B", ylabel="|mean estimate - smoothed| (+- 2 s.e.)",
                title="bias against the dense smoothed gradient")
    axes[1].set(xscale="log", yscale="log", xlabel="B", ylabel="variance of the estimate",
                title="variance (dotted: 1/B)")
    for ax in axes:
        ax.legend()
    save_figure(fig, bv_path)


def write_outputs(results: StudyResults, out: Path, command: str) -> None:
    write_text_atomic(out / "study.md", markdown(results, command))
    write_atomic(out / "study.csv", lambda f: f.write(csv_bytes(results)))
    plot_variance(results, out / "variance_vs_kappa.png")
    plot_profiles(results, out / "variance_profile.png")
    plot_ablations(results, out / "ablations.png")
    plot_pointmass(results, out / "pointmass_curves.png", out / "pointmass_bias_variance.png")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer envs, kappas, ablations and resamples")
    parser.add_argument("--out", type=Path, default=Path("out/bundling_study"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = run_study(QUICK if args.quick else FULL, log=lambda line: print(line, flush=True))
    write_outputs(results, args.out, "python bench/bundling_study.py" + (" --quick" if args.quick else ""))
    print(f"wrote {args.out}/study.md ({results.seconds / 60:.1f} min)")
    jump_cost = next(c for c in results.cost if c.scenario == "jump")
    print(f"variance_ratio_k300={goal_row(results).ratio_params:.3g} window_cost_ratio={jump_cost.ratio:.3g}")


if __name__ == "__main__":
    main()
