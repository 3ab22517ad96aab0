"""TD(lambda) targets and SHAC window returns against numbers computed by hand."""
import torch

from bcg_train.algo.returns import td_lambda_targets, window_returns

GAMMA, LAM = 0.5, 0.5
# Three envs, three steps. Columns: env 0 runs through the window; env 1 fails at step 0, times
# out at step 1 (a one-step episode after the reset), then runs; env 2 fails at the last step.
REWARDS = torch.tensor([[1.0, 4.0, 1.0], [2.0, 5.0, 1.0], [3.0, 6.0, 1.0]])
NEXT_VALUES = torch.tensor([[10.0, 40.0, 7.0], [20.0, 50.0, 7.0], [30.0, 60.0, 7.0]])
TERMINATED = torch.tensor([[False, True, False], [False, False, False], [False, False, True]])
TRUNCATED = torch.tensor([[False, False, False], [False, True, False], [False, False, False]])


def test_td_lambda_targets_match_hand_computation():
    # env 0, backwards from the window's end (bootstrap with V(s_3) = 30):
    #   G_2 = 3 + 0.5 * 30 = 18
    #   G_1 = 2 + 0.5 * (0.5 * 20 + 0.5 * 18) = 11.5
    #   G_0 = 1 + 0.5 * (0.5 * 10 + 0.5 * 11.5) = 6.375
    # cross-check G_0 as the lambda-weighted n-step returns:
    #   G^(1) = 1 + 0.5 * 10 = 6, G^(2) = 1 + 0.5 * 2 + 0.25 * 20 = 7, G^(3) = 1 + 1 + 0.25 * 3 + 0.125 * 30 = 6.5
    #   (1 - 0.5) * (6 + 0.5 * 7) + 0.5^2 * 6.5 = 4.75 + 1.625 = 6.375
    # env 1: G_2 = 6 + 0.5 * 60 = 36; G_1 = 5 + 0.5 * 50 = 30 (time-out: bootstrap, no lambda mix
    #   with the next episode); G_0 = 4 + 0 = 4 (failure: V = 0)
    # env 2: G_2 = 1 + 0 = 1 (failure at the last step); G_1 = 1 + 0.5 * (0.5 * 7 + 0.5 * 1) = 3;
    #   G_0 = 1 + 0.5 * (0.5 * 7 + 0.5 * 3) = 3.5
    expected = torch.tensor([[6.375, 4.0, 3.5], [11.5, 30.0, 3.0], [18.0, 36.0, 1.0]])
    got = td_lambda_targets(REWARDS, NEXT_VALUES, TERMINATED, TRUNCATED, GAMMA, LAM)
    torch.testing.assert_close(got, expected)


def test_td_lambda_with_lambda_zero_is_one_step_td():
    got = td_lambda_targets(REWARDS, NEXT_VALUES, TERMINATED, TRUNCATED, GAMMA, 0.0)
    expected = REWARDS + GAMMA * torch.where(TERMINATED, torch.zeros_like(NEXT_VALUES), NEXT_VALUES)
    torch.testing.assert_close(got, expected)


def test_window_returns_sum_partial_returns_with_bootstraps():
    values = NEXT_VALUES.clone().requires_grad_(True)
    got = window_returns(REWARDS, values, TERMINATED, TRUNCATED, GAMMA)
    # env 0: 1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 30 = 6.5
    # env 1: [4 + 0] + [5 + 0.5 * 50] + [6 + 0.5 * 60] = 4 + 30 + 36 = 70 (each segment restarts the discount)
    # env 2: 1 + 0.5 * 1 + 0.25 * 1 + 0.125 * 0 = 1.75
    torch.testing.assert_close(got, torch.tensor([6.5, 70.0, 1.75]))
    got.sum().backward()
    # d/dV: only segment ends bootstrap; a failure contributes nothing; time-out and window end do
    expected_grad = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.125, 0.5, 0.0]])
    torch.testing.assert_close(values.grad, expected_grad)
