"""One SHAC window of the bundling study: a per-environment policy (batched weights, so one backward
leaves each environment's own gradient), its observation and reward, and the taped 32-step window."""
import time
from dataclasses import dataclass
from typing import List

import numpy as np
import torch

from bcg.rotations import projected_gravity
from bcg_train.diffsim import SimConfig, Simulator
from bcg_train.diffsim.torch_bridge import step

from .scenarios import DT, HORIZON, Scenario, g1_model, pd_gains

GAMMA = 0.99
ACTION_SCALE = 0.1          # rad per unit policy output
HIDDEN = 64
OBS_DIM = 66
POLICY_SEED = 7


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


def observation(q: torch.Tensor, qd: torch.Tensor, ref_joint: torch.Tensor, clock: torch.Tensor,
                jq: torch.Tensor, jv: torch.Tensor) -> torch.Tensor:
    """(E, OBS_DIM) from q (E, nq), qd (E, nv), ref_joint (E, nj) rad, clock (E,) s; jq / jv: the joints'
    coordinate / velocity columns."""
    phase = 2 * np.pi * clock
    return torch.cat([q[:, jq] - ref_joint, 0.1 * qd[:, jv], 0.25 * qd[:, 3:6], projected_gravity(q[:, 3:7]),
                      torch.sin(phase)[:, None], torch.cos(phase)[:, None]], dim=1)


def reward(q: torch.Tensor, ref_joint: torch.Tensor, ref_height: torch.Tensor, jq: torch.Tensor) -> torch.Tensor:
    """(E,) tracking reward in [0, 1] (module docstring)."""
    pose = torch.exp(-2 * (q[:, jq] - ref_joint).square().sum(1))
    height = torch.exp(-100 * (q[:, 2] - ref_height).square())
    upright = torch.exp(-10 * (1 + projected_gravity(q[:, 3:7])[:, 2]))
    return 0.5 * pose + 0.3 * height + 0.2 * upright


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
