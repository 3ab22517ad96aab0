"""ADD: the adversarial differential discriminator as an imitation reward (Zhang et al. 2025, MimicKit).

The discriminator D sees differences delta = phi(reference) - phi(simulated) (F features), each
divided by a running mean of |delta|. Positives are delta = 0 (perfect tracking), negatives the
policy's deltas plus a replay buffer of older ones. Loss (MimicKit's ADDAgent):
    0.5 * (BCE(D(0), 1) + BCE(D(negatives), 0))
    + logit_reg * |W_logit|^2
    + grad_penalty * 0.5 * (mean |dD/d delta|^2 at the positive + mean |dD/d delta|^2 at the negatives).
Reward: r = reward_scale * -log(max(1 - sigmoid(D(delta)), 1e-4)), computed here as
reward_scale * min(softplus(D), -log(1e-4)) (the same number, stable for large logits), and
differentiable w.r.t. phi(simulated) so SHAC backpropagates it through the simulator; the
discriminator's parameters get no gradient from the reward.
"""
import math
from dataclasses import dataclass
from typing import Dict, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bcg.config_check import require_layers, require_non_negative, require_positive

@dataclass
class AddConfig:
    """ADD, the adversarial differential discriminator (Zhang et al. 2025), as in MimicKit's G1 agent."""

    reward_scale: float = 2.0
    """Multiplier of r = -log(max(1 - sigmoid(D(delta)), 1e-4)) (MimicKit's G1 `disc_reward_scale`)."""
    hidden: Tuple[int, ...] = (1024, 512)
    """Discriminator hidden widths, ReLU (MimicKit's `fc_2layers_1024units` is 1024 then 512)."""
    learning_rate: float = 2.5e-4
    """SGD learning rate of the discriminator."""
    momentum: float = 0.9
    """SGD momentum (MimicKit's SGD)."""
    weight_decay: float = 1e-4
    """SGD weight decay (MimicKit's G1 discriminator optimiser)."""
    logit_reg: float = 0.01
    """Weight of the squared L2 norm of the logit layer's weights."""
    grad_penalty: float = 2.0
    """Weight of the gradient penalty (mean squared input-gradient norm, positives and negatives)."""
    epochs: int = 2
    """Passes over an iteration's deltas per discriminator update."""
    minibatches: int = 16
    """Minibatches per epoch; each adds as many replayed deltas as it has policy deltas (MimicKit's G1
    agent: 32 steps of deltas in batches of 2 x num_envs, i.e. 16)."""
    buffer_size: int = 200_000
    """Replay buffer capacity (deltas)."""
    replay_samples: int = 1000
    """Deltas pushed into a full replay buffer per iteration (all of them until it is full)."""
    min_diff: float = 1e-4
    """Floor of the running mean |delta| used to normalise each feature."""

    def validate(self) -> None:
        require_positive(self, "reward_scale", "learning_rate", "epochs", "minibatches", "buffer_size",
                         "replay_samples", "min_diff")
        require_non_negative(self, "momentum", "weight_decay", "logit_reg", "grad_penalty")
        require_layers(self, "hidden")


REWARD_FLOOR = 1e-4
"""1 - sigmoid(D) is clamped to at least this before the log (MimicKit)."""


class DiffNormalizer(nn.Module):
    """Per-feature running mean of |delta|; normalise(delta) = delta / max(mean |delta|, min_diff).

    `record` accumulates, `update` merges (once per iteration, after the discriminator update, as
    MimicKit does), so one iteration's rewards and updates see fixed statistics.
    """

    def __init__(self, dim: int, min_diff: float):
        super().__init__()
        self.min_diff = min_diff
        self.register_buffer("mean_abs", torch.ones(dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("pending_sum", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("pending_count", torch.zeros((), dtype=torch.float64))

    def forward(self, delta: Tensor) -> Tensor:
        return delta / self.mean_abs.clamp_min(self.min_diff)

    @torch.no_grad()
    def record(self, delta: Tensor) -> None:
        """Accumulate |delta| of the rows (B, dim) (non-finite rows are the caller's to drop)."""
        self.pending_sum += delta.abs().sum(dim=0).to(torch.float64)
        self.pending_count += delta.shape[0]

    @torch.no_grad()
    def update(self) -> None:
        if self.pending_count == 0:
            return
        total = self.count + self.pending_count
        mean = (self.mean_abs.to(torch.float64) * self.count + self.pending_sum) / total
        self.mean_abs.copy_(mean.to(self.mean_abs.dtype))
        self.count.copy_(total)
        self.pending_sum.zero_()
        self.pending_count.zero_()


class Discriminator(nn.Module):
    """MLP with ReLU hidden layers and a scalar logit; logit weights start uniform in [-1, 1] (MimicKit)."""

    def __init__(self, dim: int, hidden):
        super().__init__()
        layers, width = [], dim
        for h in hidden:
            linear = nn.Linear(width, h)
            nn.init.zeros_(linear.bias)
            layers += [linear, nn.ReLU()]
            width = h
        self.body = nn.Sequential(*layers)
        self.logit = nn.Linear(width, 1)
        nn.init.uniform_(self.logit.weight, -1.0, 1.0)
        nn.init.zeros_(self.logit.bias)

    def forward(self, x: Tensor) -> Tensor:
        """(B,) logits of normalised deltas x (B, dim)."""
        return self.logit(self.body(x)).squeeze(-1)


class DeltaReplayBuffer(nn.Module):
    """A ring buffer of raw deltas (capacity, dim); its contents are buffers, so checkpoints hold them."""

    def __init__(self, capacity: int, dim: int):
        super().__init__()
        self.register_buffer("data", torch.zeros(capacity, dim))
        self.register_buffer("head", torch.zeros((), dtype=torch.long))
        self.register_buffer("size", torch.zeros((), dtype=torch.long))

    @property
    def capacity(self) -> int:
        return self.data.shape[0]

    def is_full(self) -> bool:
        return int(self.size) == self.capacity

    @torch.no_grad()
    def push(self, rows: Tensor) -> None:
        n = min(rows.shape[0], self.capacity)
        idx = (int(self.head) + torch.arange(n, device=self.data.device)) % self.capacity
        self.data[idx] = rows[-n:].to(self.data.dtype)
        self.head.copy_((self.head + n) % self.capacity)
        self.size.copy_(torch.clamp(self.size + n, max=self.capacity))

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        idx = torch.randint(int(self.size), (n,), generator=generator, device=self.data.device)
        return self.data[idx]


class AdversarialDifferentialReward(nn.Module):
    """The ADD reward and its discriminator's training (normaliser, replay buffer, SGD optimiser).

    `reward` during the rollout; `update` once per iteration with the iteration's raw deltas.
    """

    def __init__(self, feature_dim: int, cfg: AddConfig, device: torch.device):
        super().__init__()
        self.cfg = cfg
        self.normalizer = DiffNormalizer(feature_dim, cfg.min_diff)
        self.disc = Discriminator(feature_dim, cfg.hidden)
        self.replay = DeltaReplayBuffer(cfg.buffer_size, feature_dim)
        self.to(device)
        self.optimizer = torch.optim.SGD(self.disc.parameters(), lr=cfg.learning_rate, momentum=cfg.momentum,
                                         weight_decay=cfg.weight_decay)

    def reward(self, add_sim: Tensor, add_ref: Tensor) -> Tensor:
        """(N,) reward of features (N, F); differentiable w.r.t. `add_sim`, not the discriminator."""
        params = {k: v.detach() for k, v in self.disc.named_parameters()}
        logits = torch.func.functional_call(self.disc, params, (self.normalizer(add_ref.detach() - add_sim),))
        return self.cfg.reward_scale * F.softplus(logits).clamp_max(-math.log(REWARD_FLOOR))

    def update(self, deltas: Tensor, generator: torch.Generator) -> Dict[str, float]:
        """Train on one iteration's raw deltas (B, F); returns mean losses/accuracies (names under 'add/') and
        'add/delta_abs_mean', the mean raw |delta|: tracking quality, unlike the adversarial reward.

        Order as MimicKit: record for the normaliser, push to the replay buffer, train with the current
        normaliser, then merge the normaliser's statistics. Non-finite rows are dropped; a minibatch
        whose loss or gradient is not finite is skipped and counted.
        """
        deltas = deltas.detach()
        deltas = deltas[torch.isfinite(deltas).all(dim=1)]
        n = deltas.shape[0]
        if n == 0:
            return {"add/skipped_updates": 1.0}
        self.normalizer.record(deltas)
        keep = torch.randperm(n, generator=generator, device=deltas.device)
        self.replay.push(deltas[keep[:self.cfg.replay_samples]] if self.replay.is_full() else deltas)
        batch = max(1, math.ceil(n / self.cfg.minibatches))
        sums: Dict[str, Tensor] = {}
        skipped = 0
        for _ in range(self.cfg.epochs):
            order = torch.randperm(n, generator=generator, device=deltas.device)
            for start in range(0, n, batch):
                neg = deltas[order[start:start + batch]]
                neg = torch.cat([neg, self.replay.sample(neg.shape[0], generator)])
                loss, info = self._loss(neg)
                self.optimizer.zero_grad()
                loss.backward()
                grads = [p.grad for p in self.disc.parameters()]
                if not (torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)):
                    skipped += 1
                    continue
                self.optimizer.step()
                for k, v in info.items():
                    sums[k] = sums.get(k, 0.0) + v
        self.optimizer.zero_grad()
        self.normalizer.update()
        steps = self.cfg.epochs * math.ceil(n / batch) - skipped
        out = {f"add/{k}": v.item() / steps for k, v in sums.items()} if steps else {}
        out["add/skipped_updates"] = float(skipped)
        out["add/delta_abs_mean"] = deltas.abs().mean().item()
        return out

    def _loss(self, negatives: Tensor):
        pos = torch.zeros(1, negatives.shape[1], device=negatives.device, requires_grad=True)
        neg = self.normalizer(negatives).requires_grad_(True)
        pos_logit, neg_logit = self.disc(pos), self.disc(neg)
        bce = 0.5 * (F.binary_cross_entropy_with_logits(pos_logit, torch.ones_like(pos_logit))
                     + F.binary_cross_entropy_with_logits(neg_logit, torch.zeros_like(neg_logit)))
        logit_l2 = self.disc.logit.weight.square().sum()
        pos_grad, = torch.autograd.grad(pos_logit.sum(), pos, create_graph=True)
        neg_grad, = torch.autograd.grad(neg_logit.sum(), neg, create_graph=True)
        penalty = 0.5 * (pos_grad.square().sum(-1).mean() + neg_grad.square().sum(-1).mean())
        loss = bce + self.cfg.logit_reg * logit_l2 + self.cfg.grad_penalty * penalty
        info = {"loss": loss, "bce": bce, "grad_penalty": penalty, "logit_l2": logit_l2,
                "pos_acc": (pos_logit > 0).float().mean(), "neg_acc": (neg_logit < 0).float().mean()}
        info = {k: v.detach() for k, v in info.items()}
        return loss, info

    def train_state(self) -> dict:
        """Everything to resume exactly: module buffers/weights and the optimiser."""
        return {"module": self.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_train_state(self, state: dict) -> None:
        self.load_state_dict(state["module"])
        self.optimizer.load_state_dict(state["optimizer"])
