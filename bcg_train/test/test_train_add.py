"""ADD: the reward is differentiable w.r.t. the simulated features; the discriminator learns."""
import math

import pytest
import torch

from bcg_train.algo.add import REWARD_FLOOR, AddConfig, AdversarialDifferentialReward

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F = 6


def make_add(**overrides):
    torch.manual_seed(0)
    cfg = AddConfig(hidden=(32, 32), buffer_size=128, replay_samples=16, minibatches=2, epochs=2, **overrides)
    return AdversarialDifferentialReward(F, cfg, torch.device("cpu"))


def test_reward_gradient_flows_to_simulated_features_only():
    add = make_add()
    ref = torch.randn(5, F)
    sim = torch.randn(5, F, requires_grad=True)
    r = add.reward(sim, ref)
    assert r.shape == (5,)
    r.sum().backward()
    assert sim.grad is not None and sim.grad.abs().sum() > 0
    assert all(p.grad is None for p in add.disc.parameters())
    # the same number as MimicKit's formula
    logits = add.disc(add.normalizer(ref - sim.detach()))
    expected = -2.0 * torch.log(torch.clamp_min(1 - torch.sigmoid(logits), REWARD_FLOOR))
    torch.testing.assert_close(r.detach(), expected, rtol=1e-5, atol=1e-5)


def test_reward_is_capped_where_the_discriminator_is_sure():
    add = make_add()
    state = add.train_state()
    state["module"]["disc.logit.bias"].fill_(50.0)
    add.load_train_state(state)   # the reward reads the discriminator as of its last update or load
    r = add.reward(torch.zeros(3, F, requires_grad=True), torch.zeros(3, F))
    torch.testing.assert_close(r, torch.full((3,), -2.0 * math.log(REWARD_FLOOR)))


def test_discriminator_learns_to_tell_zero_from_policy_deltas():
    add = make_add(learning_rate=1e-2)
    gen = torch.Generator().manual_seed(0)
    deltas = 0.5 + torch.rand(256, F, generator=gen)
    first = add.update(deltas, gen)
    for _ in range(30):
        last = add.update(deltas, gen)
    assert last["add/loss"] < first["add/loss"]
    assert last["add/neg_acc"] == 1.0 and last["add/pos_acc"] == 1.0
    assert last["add/skipped_updates"] == 0.0
    # perfect tracking now earns more than the policy's deltas
    zero = add.reward(torch.zeros(1, F), torch.zeros(1, F))
    policy = add.reward(-deltas[:8], torch.zeros(8, F))
    assert (policy < zero).all()


def test_normalizer_tracks_mean_absolute_delta_and_replay_fills():
    add = make_add()
    gen = torch.Generator().manual_seed(0)
    deltas = torch.tensor([[1.0, -2.0, 0.0, 4.0, 0.5, -0.5]]).repeat(100, 1)
    deltas[:, 2] = torch.linspace(-1, 1, 100)
    bad = torch.full((1, F), float("nan"))
    add.update(torch.cat([deltas, bad]), gen)
    expected = deltas.abs().mean(0)
    torch.testing.assert_close(add.normalizer.mean_abs, expected)
    assert add.normalizer.count.item() == 100
    assert int(add.replay.size) == 100
    add.update(deltas, gen)
    assert int(add.replay.size) == 128 and add.replay.is_full()
    add.update(deltas, gen)  # full: only replay_samples new rows go in
    assert int(add.replay.head) == (200 + 16) % 128


def test_an_update_leaves_rewards_already_computed_differentiable_as_they_were():
    """The discriminator may train (in another thread) while the actor still backpropagates rewards
    computed before: those keep the discriminator they were computed with."""
    add = make_add(learning_rate=1e-2)
    gen = torch.Generator().manual_seed(0)
    sim = torch.randn(5, F, requires_grad=True)
    ref = torch.randn(5, F)
    before, = torch.autograd.grad(add.reward(sim, ref).sum(), sim)
    r = add.reward(sim, ref)
    add.update(0.5 + torch.rand(64, F, generator=gen), gen)
    after_update, = torch.autograd.grad(r.sum(), sim)
    torch.testing.assert_close(after_update, before, rtol=0, atol=0)
    changed, = torch.autograd.grad(add.reward(sim, ref).sum(), sim)
    assert not torch.allclose(changed, before)
