"""Scenarios of the bundling study (see `bcg_train.bundling_study`): the stand and jump batches, the
G1 model they share and the simulator settings of each run. Joint arrays in the description's order."""
import functools
from dataclasses import dataclass, replace
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import torch

from bcg.contract.builtin import stand_gains
from bcg_train.diffsim import BundleConfig, BundleExperiments, Model, SimConfig, Simulator

DT = 0.02                   # s, control step
HORIZON = 32                # control steps of the SHAC window
KAPPAS = (50.0, 100.0, 300.0, 1000.0)


SETTLE_STEPS = 50           # control steps of the stand settling
ACTION_NOISE = 0.05         # rad
DEFAULT_BUNDLE = BundleConfig(enabled=True, branches=10, span_steps=2, sigma_p=0.01, sigma_v=0.02,
                              threshold=400.0, seed=0)


IMPACT_ONLY = {"onset_fraction": 0.25, "end_when_released": True}
"""Bundling of the impact only: a bundle opens where a leg's force rises above the threshold from
below a quarter of it, and ends once no branch's is above it."""


ABLATIONS = (("B=1", {"branches": 1}), ("B=4", {"branches": 4}), ("B=10 (default)", {}),
             ("B=20", {"branches": 20}), ("H=1", {"span_steps": 1}), ("H=4", {"span_steps": 4}),
             ("sigma_p=0.5cm", {"sigma_p": 0.005}), ("sigma_p=2cm", {"sigma_p": 0.02}),
             ("nominal-forward", {"experimental": BundleExperiments(nominal_forward=True)}),
             ("onset trigger", {"onset_fraction": IMPACT_ONLY["onset_fraction"]}),
             ("end when released", {"end_when_released": IMPACT_ONLY["end_when_released"]}),
             ("impact only", IMPACT_ONLY), ("auto sigma", {"experimental": BundleExperiments(auto_sigma=True)}))
"""(label, bundle settings over DEFAULT_BUNDLE) of the kappa-300 ablations. `experimental.alpha_order` is not among
them: its weight is measured at a segment's end, so in the study's one window it is the plain bundle."""

IMPACT_ONLY_BUNDLE = replace(DEFAULT_BUNDLE, **IMPACT_ONLY)


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
    """(kp, kd) (nj,) of the stand policy (`bcg.contract.builtin.stand_gains`), as tensors."""
    kp, kd = stand_gains(model.robot)
    return torch.tensor(kp), torch.tensor(kd)


@functools.lru_cache(maxsize=None)
def g1_model() -> Model:
    """The G1 Model every run of the study shares (built once)."""
    return Model.from_mujoco(device="cpu")


def study_config(kappa: float, bundle: Optional[BundleConfig]) -> SimConfig:
    """The simulator settings at `kappa`, with `bundle` (None: bundling off)."""
    return SimConfig(kappa=kappa, bundle=bundle or BundleConfig())


def settled_stand(model: Model, config: SimConfig) -> Tuple[np.ndarray, np.ndarray]:
    """(q (nq,), qd (nv,)) after SETTLE_STEPS of PD on the default pose from the standing height, simulated
    (no gradients) with `config` (the plain one: bundling off)."""
    sim = Simulator(model, 1, config)
    kp, kd = pd_gains(model)
    s0, s1 = sim.state().assign(model.default_qpos(model.robot.standing_height), np.zeros(model.nv)), sim.state()
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


ScenarioFactory = Callable[[SimConfig], Scenario]


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
