"""Advantage estimators of ``ladder.core.advantages`` against hand-computed cases and slow loops."""

from __future__ import annotations

import math

import pytest
import torch
from core_loss_refs import D, right_padded_mask, t

from ladder.core import discounted_returns, gae, group_relative, leave_one_out, whiten

# --------------------------------------------------------------------------- slow references


def ref_discounted_returns(rewards, mask, gamma):
    B, T = len(rewards), len(rewards[0])
    out = [[0.0] * T for _ in range(B)]
    for b in range(B):
        length = sum(1 for m in mask[b] if m)
        running = 0.0
        for i in reversed(range(length)):
            running = rewards[b][i] + gamma * running
            out[b][i] = running
    return out


def ref_gae(rewards, values, dones, gamma, lam, last_values):
    B, T = len(rewards), len(rewards[0])
    adv = [[0.0] * T for _ in range(B)]
    for b in range(B):
        next_adv = 0.0
        for i in reversed(range(T)):
            next_value = values[b][i + 1] if i + 1 < T else last_values[b]
            not_done = 1.0 - dones[b][i]
            delta = rewards[b][i] + gamma * next_value * not_done - values[b][i]
            next_adv = delta + gamma * lam * not_done * next_adv
            adv[b][i] = next_adv
    returns = [[adv[b][i] + values[b][i] for i in range(T)] for b in range(B)]
    return adv, returns


def ref_std(xs):
    mean = sum(xs) / len(xs)
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def ref_group_relative(rewards, group_size, scale, eps):
    out = []
    batch_std = ref_std(rewards)
    for start in range(0, len(rewards), group_size):
        group = rewards[start:start + group_size]
        mean = sum(group) / len(group)
        if scale == "group":
            denom = ref_std(group) + eps
        elif scale == "batch":
            denom = batch_std + eps
        else:
            denom = 1.0
        out.extend((r - mean) / denom for r in group)
    return out


def ref_whiten(x, mask, shift_mean, eps):
    real = [x[b][i] for b in range(len(x)) for i in range(len(x[0])) if mask[b][i]]
    mean = sum(real) / len(real)
    var = sum((v - mean) ** 2 for v in real) / max(len(real) - 1, 1)
    out = []
    for b in range(len(x)):
        row = []
        for i in range(len(x[0])):
            if not mask[b][i]:
                row.append(0.0)
                continue
            v = (x[b][i] - mean) / math.sqrt(var + eps)
            row.append(v if shift_mean else v + mean)
        out.append(row)
    return out


# --------------------------------------------------------------------------- discounted_returns


def test_discounted_returns_hand_case():
    # gamma = 0.5
    # row 0, rewards 1 2 3:      G2 = 3, G1 = 2 + 0.5*3 = 3.5, G0 = 1 + 0.5*3.5 = 2.75
    # row 1, rewards 4 5 | pad:  G1 = 5, G0 = 4 + 0.5*5 = 6.5, padding -> 0 (its reward 100 is ignored)
    rewards = t([[1.0, 2.0, 3.0], [4.0, 5.0, 100.0]])
    mask = t([[1, 1, 1], [1, 1, 0]])
    out = discounted_returns(rewards, mask, gamma=0.5)
    assert torch.allclose(out, t([[2.75, 3.5, 3.0], [6.5, 5.0, 0.0]]), atol=1e-12, rtol=0)


def test_discounted_returns_gamma_one_and_zero():
    rewards = t([[1.0, 2.0, 3.0]])
    mask = t([[1, 1, 1]])
    # gamma = 1: plain reward-to-go 6, 5, 3; gamma = 0: the reward itself
    assert torch.equal(discounted_returns(rewards, mask, 1.0), t([[6.0, 5.0, 3.0]]))
    assert torch.equal(discounted_returns(rewards, mask, 0.0), t([[1.0, 2.0, 3.0]]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_discounted_returns_matches_loops(seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    B, T, gamma = 6, 9, 0.93
    rewards = torch.randn(B, T, dtype=D)
    mask = right_padded_mask(B, T, g, min_len=0)
    out = discounted_returns(rewards, mask, gamma)
    expected = t(ref_discounted_returns(rewards.tolist(), mask.tolist(), gamma))
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)
    assert torch.all(out[mask == 0] == 0)


def test_discounted_returns_ignores_padding_values():
    torch.manual_seed(3)
    g = torch.Generator().manual_seed(3)
    rewards = torch.randn(5, 7, dtype=D)
    mask = right_padded_mask(5, 7, g)
    noisy = torch.where(mask.bool(), rewards, torch.randn(5, 7, dtype=D) * 1e3)
    assert torch.equal(discounted_returns(rewards, mask, 0.9), discounted_returns(noisy, mask, 0.9))


# --------------------------------------------------------------------------- gae


def test_gae_hand_case_done_in_middle_and_bootstrap():
    # gamma = lam = 0.5 (gamma*lam = 0.25), V = [0.5, 1, 0, 2], V(s_T) = last_values = 4
    # dones = [0, 1, 0, 0]: the episode ends after step 1, step 2 starts a new one.
    # delta_0 = 1 + 0.5*1.0      - 0.5 =  1.0
    # delta_1 = 0 + 0 (done)     - 1.0 = -1.0
    # delta_2 = 2 + 0.5*2.0      - 0.0 =  3.0
    # delta_3 = 1 + 0.5*4.0      - 2.0 =  1.0     (bootstrapped from last_values)
    # A_3 = 1.0; A_2 = 3 + 0.25*1 = 3.25; A_1 = -1.0 (done cuts A_2 off); A_0 = 1 + 0.25*(-1) = 0.75
    # R = A + V = [1.25, 0.0, 3.25, 3.0]
    rewards = t([[1.0, 0.0, 2.0, 1.0]])
    values = t([[0.5, 1.0, 0.0, 2.0]])
    dones = t([[0, 1, 0, 0]])
    adv, ret = gae(rewards, values, dones, gamma=0.5, lam=0.5, last_values=t([4.0]))
    assert torch.allclose(adv, t([[0.75, -1.0, 3.25, 1.0]]), atol=1e-12, rtol=0)
    assert torch.allclose(ret, t([[1.25, 0.0, 3.25, 3.0]]), atol=1e-12, rtol=0)


def test_gae_hand_case_done_at_last_step_ignores_bootstrap():
    # Same as above with dones = [0, 1, 0, 1]: delta_3 = 1 - 2 = -1 (no bootstrap from V(s_T) = 1000)
    # A_3 = -1; A_2 = 3 + 0.25*(-1) = 2.75; A_1 = -1; A_0 = 0.75;  R = [1.25, 0.0, 2.75, 1.0]
    rewards = t([[1.0, 0.0, 2.0, 1.0]])
    values = t([[0.5, 1.0, 0.0, 2.0]])
    dones = t([[0, 1, 0, 1]])
    for last in (t([1000.0]), None):
        adv, ret = gae(rewards, values, dones, gamma=0.5, lam=0.5, last_values=last)
        assert torch.allclose(adv, t([[0.75, -1.0, 2.75, -1.0]]), atol=1e-12, rtol=0)
        assert torch.allclose(ret, t([[1.25, 0.0, 2.75, 1.0]]), atol=1e-12, rtol=0)


def test_gae_last_values_none_is_zero_bootstrap():
    # one step, r = 1, V = 0.5, not done: delta = 1 + 0.9*V(s_T) - 0.5
    rewards, values, dones = t([[1.0]]), t([[0.5]]), t([[0.0]])
    adv_none, _ = gae(rewards, values, dones, 0.9, 0.95)
    adv_two, _ = gae(rewards, values, dones, 0.9, 0.95, last_values=t([2.0]))
    assert torch.allclose(adv_none, t([[0.5]]), atol=1e-12, rtol=0)          # 1 + 0 - 0.5
    assert torch.allclose(adv_two, t([[2.3]]), atol=1e-12, rtol=0)           # 1 + 1.8 - 0.5


def test_gae_lambda_one_is_discounted_return_minus_value():
    # lam = 1, done at the end: A_t = G_t - V(s_t) with G the discounted return
    torch.manual_seed(4)
    rewards, values = torch.randn(3, 6, dtype=D), torch.randn(3, 6, dtype=D)
    dones = torch.zeros(3, 6, dtype=D)
    dones[:, -1] = 1
    adv, ret = gae(rewards, values, dones, gamma=0.9, lam=1.0)
    G = discounted_returns(rewards, torch.ones_like(rewards), 0.9)
    assert torch.allclose(adv, G - values, atol=1e-12, rtol=0)
    assert torch.allclose(ret, G, atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("bootstrap", [True, False])
def test_gae_matches_loops(seed, bootstrap):
    torch.manual_seed(seed)
    B, T, gamma, lam = 5, 8, 0.97, 0.9
    rewards = torch.randn(B, T, dtype=D)
    values = torch.randn(B, T, dtype=D)
    dones = (torch.rand(B, T) < 0.25).to(D)
    dones[0, T // 2] = 1            # at least one done in the middle
    dones[1, -1] = 1                # and one at the last step
    last_values = torch.randn(B, dtype=D) if bootstrap else None
    adv, ret = gae(rewards, values, dones, gamma, lam, last_values=last_values)
    lv = last_values.tolist() if bootstrap else [0.0] * B
    exp_adv, exp_ret = ref_gae(rewards.tolist(), values.tolist(), dones.tolist(), gamma, lam, lv)
    assert torch.allclose(adv, t(exp_adv), atol=1e-12, rtol=0)
    assert torch.allclose(ret, t(exp_ret), atol=1e-12, rtol=0)


def test_gae_padding_after_done_does_not_leak():
    # right-padded rows that end with done at their last real step: the real advantages must not
    # depend on whatever sits in the padding (rewards, values, dones).
    torch.manual_seed(5)
    g = torch.Generator().manual_seed(5)
    B, T = 6, 7
    mask = right_padded_mask(B, T, g)
    last = (mask.cumsum(1) == mask.sum(1, keepdim=True)) & mask.bool()
    rewards, values = torch.randn(B, T, dtype=D) * mask, torch.randn(B, T, dtype=D) * mask
    dones = last.to(D)
    adv, ret = gae(rewards, values, dones, 0.99, 0.95, last_values=torch.randn(B, dtype=D))
    pad = ~mask.bool()
    rewards2 = torch.where(pad, torch.randn(B, T, dtype=D) * 100, rewards)
    values2 = torch.where(pad, torch.randn(B, T, dtype=D) * 100, values)
    dones2 = torch.where(pad, (torch.rand(B, T) < 0.5).to(D), dones)
    adv2, ret2 = gae(rewards2, values2, dones2, 0.99, 0.95, last_values=torch.randn(B, dtype=D))
    real = mask.bool()
    assert torch.equal(adv[real], adv2[real])
    assert torch.equal(ret[real], ret2[real])


# --------------------------------------------------------------------------- group_relative


def test_group_relative_hand_case_group_scale():
    # group_size 3, groups [0, 3, 6], [5, 5, 5], [1, 2, 3]
    # [0,3,6]: mean 3, centred [-3, 0, 3], unbiased var (9+0+9)/2 = 9, std 3 -> [-3, 0, 3] / (3 + eps)
    # [5,5,5]: zero spread -> exactly 0
    # [1,2,3]: mean 2, centred [-1, 0, 1], unbiased var 2/2 = 1, std 1     -> [-1, 0, 1] / (1 + eps)
    eps = 1e-4
    out = group_relative(t([0.0, 3.0, 6.0, 5.0, 5.0, 5.0, 1.0, 2.0, 3.0]), 3, "group", eps)
    expected = t([-3 / 3.0001, 0.0, 3 / 3.0001, 0.0, 0.0, 0.0, -1 / 1.0001, 0.0, 1 / 1.0001])
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)
    assert torch.all(out[3:6] == 0)


def test_group_relative_hand_case_batch_and_none_scale():
    # rewards [0, 3, 6 | 1, 2, 3]; centred by own group mean: [-3, 0, 3, -1, 0, 1]
    # batch mean 15/6 = 2.5, squared deviations 6.25+0.25+12.25+2.25+0.25+0.25 = 21.5,
    # unbiased var 21.5/5 = 4.3 -> batch std sqrt(4.3)
    rewards = t([0.0, 3.0, 6.0, 1.0, 2.0, 3.0])
    centred = t([-3.0, 0.0, 3.0, -1.0, 0.0, 1.0])
    out_batch = group_relative(rewards, 3, "batch", eps=1e-4)
    assert torch.allclose(out_batch, centred / (math.sqrt(4.3) + 1e-4), atol=1e-12, rtol=0)
    out_none = group_relative(rewards, 3, "none")
    assert torch.allclose(out_none, centred, atol=1e-12, rtol=0)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_group_relative_zero_spread_gives_zero_not_nan(scale):
    rewards = t([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])  # every group constant, batch std > 0
    out = group_relative(rewards, 4, scale)
    assert torch.isfinite(out).all()
    assert torch.all(out == 0)
    all_equal = group_relative(t([2.0] * 6), 3, scale)        # batch std = 0 as well
    assert torch.isfinite(all_equal).all()
    assert torch.all(all_equal == 0)


@pytest.mark.parametrize("group_size", [1, 0, -2])
def test_group_relative_group_size_below_two_raises(group_size):
    with pytest.raises(ValueError):
        group_relative(t([1.0, 2.0, 3.0, 4.0]), group_size)


def test_group_relative_bad_inputs_raise():
    with pytest.raises(ValueError):
        group_relative(t([1.0, 2.0, 3.0]), 2)              # 3 rewards do not form groups of 2
    with pytest.raises(ValueError):
        group_relative(t([1.0, 2.0, 3.0, 4.0]), 2, scale="bogus")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_group_relative_matches_loops(seed, scale):
    torch.manual_seed(seed)
    G = 4
    rewards = torch.randn(5 * G, dtype=D)
    rewards[G:2 * G] = 0.7                                 # one zero-spread group
    out = group_relative(rewards, G, scale, eps=1e-4)
    expected = t(ref_group_relative(rewards.tolist(), G, scale, 1e-4))
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)
    assert out.shape == rewards.shape
    # each group's advantages sum to zero
    assert torch.allclose(out.view(-1, G).sum(1), torch.zeros(5, dtype=D), atol=1e-12)


# --------------------------------------------------------------------------- whiten


def test_whiten_hand_case_masked():
    # real entries 1, 2, 3, 4: mean 2.5, unbiased var (2.25+0.25+0.25+2.25)/3 = 5/3
    # eps = 0: x_hat = (x - 2.5) / sqrt(5/3); padding (99) -> 0
    x = t([[1.0, 2.0, 3.0], [4.0, 99.0, 99.0]])
    mask = t([[1, 1, 1], [1, 0, 0]])
    s = math.sqrt(5 / 3)
    out = whiten(x, mask, eps=0.0)
    expected = t([[-1.5 / s, -0.5 / s, 0.5 / s], [1.5 / s, 0.0, 0.0]])
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)
    # shift_mean=False adds the mean 2.5 back on the real entries only
    out_keep = whiten(x, mask, shift_mean=False, eps=0.0)
    expected_keep = t([[-1.5 / s + 2.5, -0.5 / s + 2.5, 0.5 / s + 2.5], [1.5 / s + 2.5, 0.0, 0.0]])
    assert torch.allclose(out_keep, expected_keep, atol=1e-12, rtol=0)


def test_whiten_without_mask():
    # x = [1, 3]: mean 2, unbiased var ((1)+(1))/1 = 2 -> [-1/sqrt2, 1/sqrt2]
    out = whiten(t([1.0, 3.0]), eps=0.0)
    assert torch.allclose(out, t([-1 / math.sqrt(2), 1 / math.sqrt(2)]), atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("shift_mean", [True, False])
def test_whiten_matches_loops(seed, shift_mean):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    B, T = 5, 8
    x = torch.randn(B, T, dtype=D) * 3 + 2
    mask = right_padded_mask(B, T, g)
    out = whiten(x, mask, shift_mean=shift_mean, eps=1e-8)
    expected = t(ref_whiten(x.tolist(), mask.tolist(), shift_mean, 1e-8))
    assert torch.allclose(out, expected, atol=1e-10, rtol=0)
    if shift_mean:
        real = out[mask.bool()]
        assert abs(real.mean().item()) < 1e-10
        assert abs(real.var().item() - 1.0) < 1e-6


def test_whiten_ignores_padding_values():
    torch.manual_seed(6)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 6, dtype=D)
    mask = right_padded_mask(4, 6, g)
    x2 = torch.where(mask.bool(), x, torch.randn(4, 6, dtype=D) * 1e4)
    a, b = whiten(x, mask), whiten(x2, mask)
    assert torch.allclose(a, b, atol=1e-12, rtol=0)
    assert torch.all(b[mask == 0] == 0)


def test_whiten_all_padding_returns_zeros():
    # The docstring promises "Padded entries are returned as 0". With every entry padded (an empty
    # minibatch, e.g. update(normalize_advantages=True) on rows without real actions) the mean is
    # 0/0 and the result must still be all zeros, not NaN.
    x = t([[1.0, 2.0], [3.0, 4.0]])
    out = whiten(x, torch.zeros_like(x))
    assert torch.isfinite(out).all()
    assert torch.all(out == 0)


# --------------------------------------------------------------------------- leave_one_out (RLOO)


def test_leave_one_out_hand_case():
    rewards = t([1, 0, 0, 1, 2, 2, 2, 2])
    adv = leave_one_out(rewards, 4)
    # r = 1: baseline (0 + 0 + 1) / 3 = 1/3 -> 2/3; r = 0: baseline 2/3 -> −2/3; all-equal group -> 0
    assert torch.allclose(adv, t([2 / 3, -2 / 3, -2 / 3, 2 / 3, 0, 0, 0, 0]), atol=1e-12, rtol=0)
    assert torch.equal(adv[4:], torch.zeros(4, dtype=D))
    std = math.sqrt(4 * (2 / 3) ** 2 / 7)                       # batch std of Â (unbiased), mean 0
    whitened = leave_one_out(rewards, 4, scale="batch")
    expected = t([1, -1, -1, 1, 0, 0, 0, 0]) * (2 / 3) / (std + 1e-4)
    assert torch.allclose(whitened, expected, atol=1e-12, rtol=0)


def test_leave_one_out_is_a_rescaled_group_mean_baseline():
    g = torch.Generator().manual_seed(4)
    for G in (2, 3, 5):
        rewards = torch.randn(4 * G, generator=g, dtype=D)
        adv = leave_one_out(rewards, G).tolist()
        r = rewards.tolist()
        for k in range(4):
            group = r[k * G:(k + 1) * G]
            for i, ri in enumerate(group):
                loo = ri - (sum(group) - ri) / (G - 1)
                assert adv[k * G + i] == pytest.approx(loo, abs=1e-12)
                assert adv[k * G + i] == pytest.approx(G / (G - 1) * (ri - sum(group) / G), abs=1e-12)
    assert torch.equal(leave_one_out(torch.full((6,), 3.0), 3), torch.zeros(6))


def test_leave_one_out_rejects_bad_arguments():
    rewards = torch.arange(8.0)
    with pytest.raises(ValueError, match="scale"):
        leave_one_out(rewards, 4, scale="group")
    with pytest.raises(ValueError, match="group_size"):
        leave_one_out(rewards, 1)
    with pytest.raises(ValueError, match="groups"):
        leave_one_out(rewards, 3)
