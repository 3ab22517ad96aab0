"""Domain randomisation of the G1 imitation environment (`RandomizationConfig`).

`DomainRandomizer` owns every random draw of the randomisation (one torch generator, saved and
restored with the environment, so a resumed run draws the same numbers) and the per-environment
state it implies: PD gain multipliers and action delays drawn at each episode start, push timers,
and the shared physics variation (contact stiffness and stabilisation, floor friction, payload and
centre-of-mass shift) the environment hands to its simulators. Shapes: N environments, n joints,
nb bodies; tensors on the environment's device, except the push timers and the episode indices and
step counters they are compared with, which stay on the host (the generator's device): deciding a
push never waits for the device.
"""
import dataclasses
from typing import Dict, Tuple

import numpy as np
import torch
from torch import Tensor

from bcg_train.diffsim import PhysicsVariation, SimConfig

from .config import RandomizationConfig


class DomainRandomizer:
    """See the module docstring; `body_names` is the Model's body order (for `payload_body`)."""

    def __init__(self, cfg: RandomizationConfig, body_names, num_envs: int, num_joints: int, control_period_s: float,
                 device: torch.device, seed: int, dtype: torch.dtype = torch.float64):
        if cfg.payload_body not in body_names:
            raise ValueError(f"env.randomization.payload_body: {cfg.payload_body!r} is not a body of the model "
                             f"({', '.join(body_names)})")
        self.cfg, self.num_envs, self.device, self.dtype = cfg, num_envs, device, dtype
        self.period_s = control_period_s
        self._payload = list(body_names).index(cfg.payload_body)
        self._nb = len(body_names)
        self.generator = torch.Generator(device="cpu").manual_seed(seed + 7919)
        self.kp_scale = torch.ones(num_envs, num_joints, dtype=dtype, device=device)
        self.kd_scale = torch.ones(num_envs, num_joints, dtype=dtype, device=device)
        self.delay = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.next_push = torch.zeros(num_envs, dtype=torch.long)
        """(N,) on the host: the episode step of each environment's next push."""
        self.pushes = 0
        self.steps_since_physics = cfg.physics_every_steps    # the first step draws
        self.physics: Dict[str, object] = {}
        """The current shared physics draw ({} before the first)."""

    @property
    def max_delay(self) -> int:
        return int(self.cfg.action_delay_steps[1])

    # -- draws ------------------------------------------------------------------------------------------
    def _uniform(self, bounds, *shape, on_host: bool = False) -> Tensor:
        low, high = float(bounds[0]), float(bounds[1])
        drawn = low + (high - low) * torch.rand(*shape, generator=self.generator, dtype=torch.float64)
        return drawn if on_host else drawn.to(self.device)

    def episode_start(self, idx_host: Tensor, steps_host: Tensor) -> None:
        """Draw gains, delays and the next push of environments `idx_host` (host indices; their episode
        step counters `steps_host`, on the host)."""
        k, n = len(idx_host), self.kp_scale.shape[1]
        if k == 0:
            return
        idx = idx_host.to(self.device)
        # new tensors, not in-place writes: the old ones may be saved in the autograd graph of the window
        self.kp_scale = self.kp_scale.index_put((idx,), self._uniform(self.cfg.kp_scale, k, n).to(self.dtype))
        self.kd_scale = self.kd_scale.index_put((idx,), self._uniform(self.cfg.kd_scale, k, n).to(self.dtype))
        low, high = self.cfg.action_delay_steps
        delay = torch.randint(int(low), int(high) + 1, (k,), generator=self.generator).to(self.device)
        self.delay = self.delay.index_put((idx,), delay)
        self.next_push[idx_host] = steps_host + self._push_gap(k)

    def _push_gap(self, k: int) -> Tensor:
        """(k,) control steps to the next push, on the host."""
        return torch.round(self._uniform(self.cfg.push_interval_s, k, on_host=True) / self.period_s).long().clamp(min=1)

    def push(self, qd: Tensor, steps_host: Tensor) -> Tuple[Tensor, Tensor]:
        """(qd with a horizontal base velocity change added where a push is due, the pushed indices on
        the host). qd (N, nv), base linear velocity (world) first; steps_host (N,) control steps into
        each episode, on the host."""
        due = (steps_host >= self.next_push).nonzero().squeeze(-1)
        if len(due) == 0 or self.cfg.push_velocity == 0:
            return qd, due[:0]
        angle = self._uniform((0.0, 2.0 * np.pi), len(due), on_host=True)
        speed = self.cfg.push_velocity * torch.sqrt(self._uniform((0.0, 1.0), len(due), on_host=True))
        kick = torch.zeros(qd.shape[0], 2, dtype=torch.float64)
        kick[due, 0] = speed * torch.cos(angle)
        kick[due, 1] = speed * torch.sin(angle)
        self.next_push[due] = steps_host[due] + self._push_gap(len(due))
        self.pushes += len(due)
        return torch.cat([qd[:, :2] + kick.to(qd), qd[:, 2:]], dim=1), due

    def observation_noise(self, like: Tensor, std: float) -> Tensor:
        """Gaussian noise shaped like `like` (no graph)."""
        if std == 0:
            return torch.zeros_like(like)
        return std * torch.randn(like.shape, generator=self.generator, dtype=torch.float64).to(like)

    def draw_physics(self) -> None:
        """A new shared physics draw (`current` turns it into simulator settings)."""
        c = self.cfg
        self.physics = {"kappa_scale": float(self._uniform(c.kappa_scale, 1, on_host=True)),
                        "contact_stabilization": float(self._uniform(c.contact_stabilization, 1, on_host=True)),
                        "friction_scale": float(self._uniform(c.friction_scale, 1, on_host=True)),
                        "payload_mass": float(self._uniform(c.payload_mass, 1, on_host=True)),
                        "com_shift": self._uniform((-c.com_shift, c.com_shift), 3, on_host=True).tolist()}
        self.steps_since_physics = 0

    def current(self, nominal: SimConfig) -> Tuple[SimConfig, PhysicsVariation]:
        """The simulator settings and physics variation of the current draw around `nominal` (the
        environment's own settings); the nominal physics before the first draw."""
        p = self.physics
        if not p:
            return nominal, PhysicsVariation()
        mass, com = np.zeros(self._nb), np.zeros((self._nb, 3))
        mass[self._payload] = p["payload_mass"]
        com[self._payload] = p["com_shift"]
        config = dataclasses.replace(nominal, kappa=nominal.kappa * p["kappa_scale"],
                                     contact_stabilization=p["contact_stabilization"])
        return config, PhysicsVariation(body_mass_offset=mass, body_com_offset=com, friction_scale=p["friction_scale"])

    # -- bookkeeping ------------------------------------------------------------------------------------
    def counters(self) -> Dict[str, float]:
        """What the training log records of the randomisation (running totals and current draws)."""
        scalars = {k: v for k, v in self.physics.items() if not isinstance(v, list)}
        return {"pushes": float(self.pushes), **{f"dr_{k}": float(v) for k, v in scalars.items()}}

    def describe(self) -> Dict[str, object]:
        """The configuration, as the policy contract records it."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self.cfg).items()}

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "kp_scale": self.kp_scale.cpu(),
                "kd_scale": self.kd_scale.cpu(), "delay": self.delay.cpu(), "next_push": self.next_push.clone(),
                "pushes": self.pushes, "steps_since_physics": self.steps_since_physics, "physics": dict(self.physics)}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        for name in ("kp_scale", "kd_scale", "delay"):
            setattr(self, name, state[name].to(self.device))
        self.next_push = state["next_push"].cpu().clone()
        self.pushes = int(state["pushes"])
        self.steps_since_physics = int(state["steps_since_physics"])
        self.physics = dict(state["physics"])
