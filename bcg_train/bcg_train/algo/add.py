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
discriminator's parameters get no gradient from the reward. The reward reads a copy of the
discriminator and normaliser taken after each update, so rewards already computed (and their
autograd graph) are not changed by the next update.
"""
import copy
import math
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bcg.config_check import LAYERS, NON_NEGATIVE, POSITIVE, Settings, setting

from .data_parallel import Ranks


@dataclass
class AddConfig(Settings):
    """ADD, the adversarial differential discriminator (Zhang et al. 2025), as in MimicKit's G1 agent."""

    reward_scale: float = setting(2.0, POSITIVE)
    """Multiplier of r = -log(max(1 - sigmoid(D(delta)), 1e-4)) (MimicKit's G1 `disc_reward_scale`)."""
    hidden: Tuple[int, ...] = setting((1024, 512), LAYERS)
    """Discriminator hidden widths, ReLU (MimicKit's `fc_2layers_1024units` is 1024 then 512)."""
    learning_rate: float = setting(2.5e-4, POSITIVE)
    """SGD learning rate of the discriminator."""
    momentum: float = setting(0.9, NON_NEGATIVE)
    """SGD momentum (MimicKit's SGD)."""
    weight_decay: float = setting(1e-4, NON_NEGATIVE)
    """SGD weight decay (MimicKit's G1 discriminator optimiser)."""
    logit_reg: float = setting(0.01, NON_NEGATIVE)
    """Weight of the squared L2 norm of the logit layer's weights."""
    grad_penalty: float = setting(2.0, NON_NEGATIVE)
    """Weight of the gradient penalty (mean squared input-gradient norm, positives and negatives)."""
    epochs: int = setting(2, POSITIVE)
    """Passes over an iteration's deltas per discriminator update."""
    minibatches: int = setting(16, POSITIVE)
    """Minibatches (= SGD steps) per epoch; each adds as many replayed deltas as it has policy deltas
    (MimicKit's G1 agent: 32 steps of deltas in batches of 2 x num_envs, i.e. 16)."""
    buffer_size: int = setting(200_000, POSITIVE)
    """Replay buffer capacity (deltas)."""
    replay_samples: int = setting(1000, POSITIVE)
    """Deltas pushed into a full replay buffer per iteration (all of them until it is full)."""
    min_diff: float = setting(1e-4, POSITIVE)
    """Floor of the running mean |delta| used to normalise each feature."""


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
    def update(self, ranks: Ranks) -> None:
        """Merge what every rank recorded since the last update (nothing recorded: no change)."""
        ranks.sum_([self.pending_sum, self.pending_count])
        total = self.count + self.pending_count
        mean = (self.mean_abs.to(torch.float64) * self.count + self.pending_sum) / total.clamp_min(1.0)
        self.mean_abs.copy_(torch.where(self.pending_count > 0, mean, self.mean_abs.to(torch.float64)))
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
    """A ring buffer of raw deltas (capacity, dim); its contents are buffers, so checkpoints hold them.
    `head` and `size` are mirrored on the host (no device read to push or sample); call
    `load_counters` after loading a state dict."""

    def __init__(self, capacity: int, dim: int):
        super().__init__()
        self.register_buffer("data", torch.zeros(capacity, dim))
        self.register_buffer("head", torch.zeros((), dtype=torch.long))
        self.register_buffer("size", torch.zeros((), dtype=torch.long))
        self._head = self._size = 0

    @property
    def capacity(self) -> int:
        return self.data.shape[0]

    @property
    def stored(self) -> int:
        """Deltas held."""
        return self._size

    def is_full(self) -> bool:
        return self._size == self.capacity

    def load_counters(self) -> None:
        self._head, self._size = int(self.head), int(self.size)

    @torch.no_grad()
    def push(self, rows: Tensor) -> None:
        n = min(rows.shape[0], self.capacity)
        idx = (self._head + torch.arange(n, device=self.data.device)) % self.capacity
        self.data[idx] = rows[-n:].to(self.data.dtype)
        self._head, self._size = (self._head + n) % self.capacity, min(self._size + n, self.capacity)
        self.head.fill_(self._head)
        self.size.fill_(self._size)

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        idx = torch.randint(self._size, (n,), generator=generator, device=self.data.device)
        return self.data[idx]


LOSS_TERMS = ("loss", "bce", "grad_penalty", "logit_l2", "pos_acc", "neg_acc")
"""The discriminator's loss terms and accuracies, reported as 'add/<name>' (means over its steps)."""


class AdversarialDifferentialReward(nn.Module):
    """The ADD reward and its discriminator's training (normaliser, replay buffer, SGD optimiser).

    `reward` during the rollout; `update` once per iteration with the iteration's raw deltas. With
    several ranks (`ranks`), each keeps its own replay buffer and the gradients and normaliser
    statistics are combined, so the discriminator stays the same on every rank.
    """

    def __init__(self, feature_dim: int, cfg: AddConfig, device: torch.device, ranks: Optional[Ranks] = None):
        super().__init__()
        self.cfg = cfg
        self.ranks = ranks or Ranks()
        self.normalizer = DiffNormalizer(feature_dim, cfg.min_diff)
        self.disc = Discriminator(feature_dim, cfg.hidden)
        self.replay = DeltaReplayBuffer(cfg.buffer_size, feature_dim)
        self.to(device)
        self.ranks.broadcast_(self.disc.parameters())
        self.optimizer = torch.optim.SGD(self.disc.parameters(), lr=cfg.learning_rate, momentum=cfg.momentum,
                                         weight_decay=cfg.weight_decay, fused=True)
        self._zero_momentum()
        self._freeze()

    def _zero_momentum(self) -> None:
        """Momentum buffers that exist from the start (zeros: the same first step as none), so that a
        skipped first step cannot leave them uninitialised (fused SGD skips through `found_inf`)."""
        for p in self.disc.parameters():
            self.optimizer.state[p].setdefault("momentum_buffer", torch.zeros_like(p))

    def _freeze(self) -> None:
        """The copy of the discriminator and normaliser that `reward` reads until the next update (new
        tensors each time: graphs built on the previous copy stay valid)."""
        self._frozen_disc = copy.deepcopy(self.disc).requires_grad_(False)
        self._frozen_scale = self.normalizer.mean_abs.clamp_min(self.cfg.min_diff).clone()

    def reward(self, add_sim: Tensor, add_ref: Tensor) -> Tensor:
        """(...,) reward of features (..., F); differentiable w.r.t. `add_sim`, not the discriminator."""
        delta = (add_ref.detach() - add_sim) / self._frozen_scale
        logits = self._frozen_disc(delta.reshape(-1, delta.shape[-1])).reshape(delta.shape[:-1])
        return self.cfg.reward_scale * F.softplus(logits).clamp_max(-math.log(REWARD_FLOOR))

    def update(self, deltas: Tensor, generator: torch.Generator) -> Dict[str, Tensor]:
        """Train on one iteration's raw deltas (B, F); returns mean losses/accuracies (names under 'add/', as
        tensors: no host synchronisation) and 'add/delta_abs_mean', the mean raw |delta|: tracking quality,
        unlike the adversarial reward.

        Order as MimicKit: record for the normaliser, push to the replay buffer, train with the current
        normaliser, then merge the normaliser's statistics. Non-finite rows are dropped; a minibatch
        whose loss or gradient is not finite is skipped (on every rank) and counted.
        """
        deltas = deltas.detach()
        deltas = deltas[torch.isfinite(deltas).all(dim=1)]
        n = deltas.shape[0]
        if n:
            self.normalizer.record(deltas)
            keep = torch.randperm(n, generator=generator, device=deltas.device)
            self.replay.push(deltas[keep[:self.cfg.replay_samples]] if self.replay.is_full() else deltas)
        else:   # nothing to learn from here; this rank still takes part in every collective step
            deltas = deltas.new_zeros(1, deltas.shape[1])
        params = list(self.disc.parameters())
        sums = torch.zeros(len(LOSS_TERMS), device=deltas.device)
        steps = torch.zeros((), device=deltas.device)
        for _ in range(self.cfg.epochs):
            order = torch.randperm(deltas.shape[0], generator=generator, device=deltas.device)
            for idx in torch.tensor_split(order, self.cfg.minibatches):
                neg = deltas[idx]
                if self.replay.stored:
                    neg = torch.cat([neg, self.replay.sample(neg.shape[0], generator)])
                loss, info = self._loss(neg)
                self.optimizer.zero_grad()
                loss.backward()
                loss = self.ranks.average_gradients(params, loss if n else loss * math.nan)
                ok = torch.isfinite(loss) & torch.isfinite(nn.utils.get_total_norm([p.grad for p in params]))
                self.optimizer.found_inf = (~ok).float()
                self.optimizer.step()
                sums += torch.where(ok, info, 0.0)
                steps += ok.float()
        self.optimizer.zero_grad()
        self.normalizer.update(self.ranks)
        self._freeze()
        out = {f"add/{k}": v for k, v in zip(LOSS_TERMS, sums / steps)}
        out["add/skipped_updates"] = self.cfg.epochs * self.cfg.minibatches - steps
        out["add/delta_abs_mean"] = deltas.abs().mean() if n else torch.tensor(math.nan, device=deltas.device)
        return out

    def _loss(self, negatives: Tensor):
        """The loss of one minibatch of raw negatives (B, F) against the positive delta = 0, and its
        terms (LOSS_TERMS order, detached). One forward of [0; negatives] gives both logits and, rows
        being independent, both input gradients of the penalty."""
        x = self.normalizer(torch.cat([negatives.new_zeros(1, negatives.shape[1]), negatives])).requires_grad_(True)
        logits = self.disc(x)
        pos_logit, neg_logit = logits[:1], logits[1:]
        bce = 0.5 * (F.binary_cross_entropy_with_logits(pos_logit, torch.ones_like(pos_logit))
                     + F.binary_cross_entropy_with_logits(neg_logit, torch.zeros_like(neg_logit)))
        logit_l2 = self.disc.logit.weight.square().sum()
        grad, = torch.autograd.grad(logits.sum(), x, create_graph=True)
        grad_sq = grad.square().sum(-1)
        penalty = 0.5 * (grad_sq[0] + grad_sq[1:].mean())
        loss = bce + self.cfg.logit_reg * logit_l2 + self.cfg.grad_penalty * penalty
        info = torch.stack([loss, bce, penalty, logit_l2, (pos_logit > 0).float().mean(),
                            (neg_logit < 0).float().mean()]).detach()
        return loss, info

    def train_state(self) -> dict:
        """Everything to resume exactly: module buffers/weights and the optimiser."""
        return {"module": self.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_train_state(self, state: dict) -> None:
        self.load_state_dict(state["module"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.replay.load_counters()
        self._zero_momentum()
        self._freeze()
