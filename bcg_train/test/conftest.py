"""A small deterministic differentiable `DiffEnv` for the training tests: batched 2-D double
integrators (point masses driven by acceleration actions) tracking circular reference paths, with
failures (too far from the reference) and time-outs."""
import math

import numpy as np
import pytest
import torch

from bcg.contract import PolicyContract, robot_state_spec
from bcg_train.env_api import EnvStep


class ToyTrackingEnv:
    """N point masses in `dim` dimensions; action = acceleration (m/s^2); dt = 0.1 s.

    Reference: a circle of radius 0.5 m at 1 rad/s with a random phase per episode. Observation
    (6 + 3 dim entries, the size of `robot_state_spec(dim)` so the contract validates): position
    error, velocity, next reference minus position, last action, reference velocity, sin/cos of the
    reference angle. Reward term "effort" = -0.05 |a|^2. ADD features: position and velocity.
    """

    dt = 0.1

    def __init__(self, num_envs: int = 8, dim: int = 2, episode_length: int = 15, fail_distance: float = 1.0,
                 seed: int = 0, device: str = "cpu"):
        self.num_envs, self.dim, self.device = num_envs, dim, torch.device(device)
        self.obs_dim, self.act_dim, self.add_dim = 6 + 3 * dim, dim, 2 * dim
        self.episode_length, self.fail_distance = episode_length, fail_distance
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.env_steps = 0
        zeros = torch.zeros(num_envs, dim, device=self.device)
        self.pos, self.vel, self.last_action = zeros.clone(), zeros.clone(), zeros.clone()
        self.t = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.phase = torch.zeros(num_envs, device=self.device)

    def _reference(self, t, phase):
        angle = (t.float() * self.dt + phase)[:, None]
        circle = torch.cat([torch.cos(angle), torch.sin(angle)] + [torch.zeros_like(angle)] * (self.dim - 2), -1)
        tangent = torch.cat([-torch.sin(angle), torch.cos(angle)] + [torch.zeros_like(angle)] * (self.dim - 2), -1)
        return 0.5 * circle, 0.5 * tangent, angle

    def _obs(self, pos, vel, last_action, t, phase):
        ref_pos, ref_vel, angle = self._reference(t, phase)
        next_pos, _, _ = self._reference(t + 1, phase)
        return torch.cat([pos - ref_pos, vel, next_pos - pos, last_action, ref_vel,
                          torch.sin(angle), torch.cos(angle)], -1)

    def _new_episodes(self, n):
        phase = torch.rand(n, generator=self.generator, device=self.device) * 2 * math.pi
        t = torch.zeros(n, dtype=torch.long, device=self.device)
        pos, vel, _ = self._reference(t, phase)
        pos = pos + 0.05 * torch.randn(n, self.dim, generator=self.generator, device=self.device)
        return pos, vel, t, phase

    def reset(self):
        self.pos, self.vel, self.t, self.phase = self._new_episodes(self.num_envs)
        self.last_action = torch.zeros_like(self.pos)
        return self._obs(self.pos, self.vel, self.last_action, self.t, self.phase)

    def step(self, actions):
        vel = self.vel + self.dt * actions
        pos = self.pos + self.dt * vel
        t = self.t + 1
        ref_pos, ref_vel, _ = self._reference(t, self.phase)
        terminated = (pos - ref_pos).norm(dim=-1).detach() > self.fail_distance
        truncated = (t >= self.episode_length) & ~terminated
        obs_before_reset = self._obs(pos, vel, actions, t, self.phase)
        done = (terminated | truncated)[:, None]
        new_pos, new_vel, new_t, new_phase = self._new_episodes(self.num_envs)
        self.pos = torch.where(done, new_pos, pos)
        self.vel = torch.where(done, new_vel, vel)
        self.last_action = torch.where(done, torch.zeros_like(actions), actions)
        self.t = torch.where(done[:, 0], new_t, t)
        self.phase = torch.where(done[:, 0], new_phase, self.phase)
        self.env_steps += self.num_envs
        return EnvStep(obs=self._obs(self.pos, self.vel, self.last_action, self.t, self.phase),
                       reward_terms={"effort": -0.05 * actions.square().sum(-1)},
                       add_sim=torch.cat([pos, vel], -1), add_ref=torch.cat([ref_pos, ref_vel], -1),
                       terminated=terminated, truncated=truncated, obs_before_reset=obs_before_reset,
                       counters={"env_steps_total": float(self.env_steps),
                                 "failed_fraction": terminated.float().mean().item()})

    def cut_graph(self):
        self.pos, self.vel, self.last_action = self.pos.detach(), self.vel.detach(), self.last_action.detach()

    def policy_contract(self):
        n = self.dim
        return PolicyContract(joint_names=tuple(f"axis_{i}" for i in range(n)), kp=np.full(n, 10.0),
                              kd=np.full(n, 1.0), default_joint_pos=np.zeros(n), action_scale=np.full(n, 0.25),
                              observation=robot_state_spec(n), control_period_s=self.dt, contact_stiffness=50.0,
                              motion="toy_circle")

    def state_dict(self):
        return {"pos": self.pos.detach().clone(), "vel": self.vel.detach().clone(), "t": self.t.clone(),
                "phase": self.phase.clone(), "last_action": self.last_action.detach().clone(),
                "generator": self.generator.get_state(), "env_steps": self.env_steps}

    def load_state_dict(self, state):
        for k in ("pos", "vel", "t", "phase", "last_action"):
            setattr(self, k, state[k].to(self.device).clone())
        self.generator.set_state(state["generator"])
        self.env_steps = state["env_steps"]


@pytest.fixture(scope="module")
def model():
    """The G1 Model in float64 on the CPU, built once per test module."""
    from bcg_train.diffsim import Model
    return Model.from_mujoco(device="cpu")


@pytest.fixture
def toy_env_class():
    return ToyTrackingEnv


@pytest.fixture
def toy_factory(monkeypatch, toy_env_class):
    """bcg-train's env factory replaced by the toy env's (and its check of the motion by a line saying
    so: the toy env tracks circles, whatever the motion's name); the list of (motion, kappa, bundling,
    device) it was called with."""
    from bcg_train import cli
    calls = []
    monkeypatch.setattr(cli, "checked_motion", lambda motion: f"motion {motion}: not checked (toy env)")

    def build_env(cfg, motion, device):
        calls.append((motion, cfg.env.sim.kappa, cfg.bundle, device))
        return toy_env_class(num_envs=cfg.num_envs(), seed=cfg.runner.seed, device=device)
    monkeypatch.setattr(cli, "build_env", build_env)
    return calls


@pytest.fixture
def one_torch_thread():
    """Tiny networks run far faster on one thread, and do not stall when other processes load the
    CPU (torch's thread pool then waits on descheduled threads at every operation)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_config(algorithm: str = "shac", iterations: int = 4, checkpoint_every: int = 2):
    """A TrainConfig small enough for tests: 8 toy envs, short windows, small networks."""
    from bcg_train.train_config import TrainConfig, apply_overrides
    return apply_overrides(TrainConfig(), {
        "algorithm": algorithm,
        "shac": {"num_envs": 8, "horizon": 8, "iterations": iterations, "actor_hidden": [32, 32],
                 "critic_hidden": [32, 32], "critic_iterations": 2, "critic_minibatches": 2},
        "ppo": {"num_envs": 8, "steps_per_env": 8, "iterations": iterations, "actor_hidden": [32, 32],
                "critic_hidden": [32, 32], "learning_epochs": 2, "mini_batches": 2},
        "add": {"hidden": [32, 32], "buffer_size": 256, "replay_samples": 16, "minibatches": 2, "epochs": 1},
        "runner": {"checkpoint_every": checkpoint_every, "seed": 3},
    })


@pytest.fixture
def tiny_config_factory():
    return tiny_config


@pytest.fixture
def fixed_batch_loss():
    """A function (shac, env) -> loss(): the actor loss of one window from the same start states with
    the same action noise every call, so only the actor changes between calls."""
    def make(shac, env):
        env_state, noise_state, obs = env.state_dict(), shac.context.generator.get_state(), shac.obs

        def loss():
            env.load_state_dict(env_state)
            shac.context.generator.set_state(noise_state)
            shac.obs = obs
            return shac.rollout()[0]
        return loss
    return make


@pytest.fixture
def frozen_noise():
    """A function (sim, log, record): the first run records its bundling perturbations into `log`,
    later runs replay them, so finite differences see the same bundled map as the gradient."""
    def use(sim, log, record):
        if record:
            sim.bundler.recorded = log
        else:
            sim.bundler.replay = iter(log)
    return use
