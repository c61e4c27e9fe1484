"""Policy-gradient, clipped, value and entropy losses, their aggregation, and the update statistics."""

from __future__ import annotations

import math

import pytest
import torch
from core_loss_refs import (
    D,
    flat,
    ref_aggregate,
    ref_clipped_surrogate,
    ref_explained_variance,
    ref_value_loss,
    right_padded_mask,
    t,
)

from ladder.core import (
    aggregate,
    approx_kl_old,
    cispo_loss,
    clip_fractions,
    clipped_surrogate,
    entropy_bonus,
    explained_variance,
    gamma_weight,
    masked_mean,
    pg_loss,
    ratio_stats,
    sequence_log_ratio,
    value_loss,
)
from ladder.core.losses import AGGREGATIONS

# --------------------------------------------------------------------------- pg_loss / entropy


def test_pg_loss_hand_case_and_gradient():
    # L = -A * logp: [-(2)(-1), -(-0.5)(-2)] = [2, -1]; dL/dlogp = -A = [-2, 0.5]
    logp = t([-1.0, -2.0]).requires_grad_()
    adv = t([2.0, -0.5])
    out = pg_loss(logp, adv)
    assert torch.allclose(out, t([2.0, -1.0]), atol=1e-12, rtol=0)
    out.sum().backward()
    assert torch.equal(logp.grad, t([-2.0, 0.5]))


def test_pg_loss_matches_loops():
    torch.manual_seed(12)
    logp, adv = torch.randn(4, 5, dtype=D), torch.randn(4, 5, dtype=D)
    expected = [[-adv[b, i].item() * logp[b, i].item() for i in range(5)] for b in range(4)]
    assert torch.allclose(pg_loss(logp, adv), t(expected), atol=1e-12, rtol=0)


def test_entropy_bonus_is_negative_entropy():
    assert torch.equal(entropy_bonus(t([0.5, 1.0])), t([-0.5, -1.0]))


# --------------------------------------------------------------------------- clipped_surrogate


def test_clipped_surrogate_hand_case_asymmetric():
    # eps_low 0.2 -> lower bound 0.8; eps_high 0.28 -> upper bound 1.28
    #  r     A    r*A    clip(r)*A   L = -min     clipped branch chosen?
    # 0.5    1    0.5    0.8         -0.5         no
    # 0.5   -1   -0.5   -0.8          0.8         yes
    # 1.0    2    2.0    2.0         -2.0         (tie)
    # 1.5    1    1.5    1.28        -1.28        yes
    # 1.5   -1   -1.5   -1.28         1.5         no
    # 1.25   1    1.25   1.25        -1.25        no (would be clipped at 1.2 with symmetric eps)
    # 0.79  -1   -0.79  -0.8          0.8         yes
    ratio = t([0.5, 0.5, 1.0, 1.5, 1.5, 1.25, 0.79])
    adv = t([1.0, -1.0, 2.0, 1.0, -1.0, 1.0, -1.0])
    out = clipped_surrogate(ratio, adv, 0.2, 0.28)
    assert torch.allclose(out, t([-0.5, 0.8, -2.0, -1.28, 1.5, -1.25, 0.8]), atol=1e-12, rtol=0)
    # symmetric (eps_high=None -> eps_low): the 1.25 row becomes clipped at 1.2
    sym = clipped_surrogate(ratio, adv, 0.2)
    assert sym[5].item() == pytest.approx(-1.2, abs=1e-12)
    assert torch.allclose(sym, clipped_surrogate(ratio, adv, 0.2, 0.2), atol=0, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_clipped_surrogate_matches_loops(seed):
    torch.manual_seed(seed)
    ratio = torch.exp(torch.randn(40, dtype=D) * 0.4)
    adv = torch.randn(40, dtype=D)
    out = clipped_surrogate(ratio, adv, 0.1, 0.3)
    expected = t(ref_clipped_surrogate(ratio.tolist(), adv.tolist(), 0.1, 0.3))
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("eps_low,eps_high", [(0.2, 0.2), (0.2, 0.28), (0.1, 0.4)])
def test_clipped_surrogate_gradient_zero_exactly_where_clipped(eps_low, eps_high):
    torch.manual_seed(13)
    # ratios well below 1 - eps_low, inside the trust region, well above 1 + eps_high
    below = torch.linspace(0.3, 1 - eps_low - 0.02, 5, dtype=D)
    inside = torch.linspace(1 - eps_low + 0.02, 1 + eps_high - 0.02, 5, dtype=D)
    above = torch.linspace(1 + eps_high + 0.02, 2.5, 5, dtype=D)
    r = torch.cat([below, inside, above])
    magnitudes = torch.rand(2, r.numel(), dtype=D) + 0.1
    ratio = torch.cat([r, r]).requires_grad_()
    adv = torch.cat([magnitudes[0], -magnitudes[1]])             # both signs for every ratio
    clipped_surrogate(ratio, adv, eps_low, eps_high).sum().backward()
    rv = ratio.detach()
    zero = ((rv > 1 + eps_high) & (adv > 0)) | ((rv < 1 - eps_low) & (adv < 0))
    assert zero.sum().item() == 10                                # 5 high-clipped + 5 low-clipped
    assert torch.all(ratio.grad[zero] == 0)
    assert torch.all(ratio.grad[~zero] != 0)
    assert torch.equal(ratio.grad[~zero], -adv[~zero])            # dL/dr = -A where unclipped


# --------------------------------------------------------------------------- value_loss


def test_value_loss_hand_case():
    # V = [1, 3, 0], V_old = [0, 2.5, 0.5], R = 2, clip 0.2
    # unclipped (V-R)^2 = [1, 1, 4]                       -> 0.5 * = [0.5, 0.5, 2.0]
    # V_clip = V_old + clip(V - V_old, +-0.2) = [0.2, 2.7, 0.3]; (V_clip - R)^2 = [3.24, 0.49, 2.89]
    # max = [3.24, 1, 4]                                  -> 0.5 * = [1.62, 0.5, 2.0]
    v = t([1.0, 3.0, 0.0]).requires_grad_()
    v_old, R = t([0.0, 2.5, 0.5]), t([2.0, 2.0, 2.0])
    assert torch.allclose(value_loss(v, v_old, R), t([0.5, 0.5, 2.0]), atol=1e-12, rtol=0)
    clipped = value_loss(v, v_old, R, clip=0.2)
    assert torch.allclose(clipped, t([1.62, 0.5, 2.0]), atol=1e-12, rtol=0)
    clipped.sum().backward()
    # cell 0 takes the clipped branch with V - V_old = 1 outside +-0.2: no gradient; the others
    # take the unclipped branch: dL/dV = V - R = [., 1, -2]
    assert torch.allclose(v.grad, t([0.0, 1.0, -2.0]), atol=1e-12, rtol=0)
    assert v.grad[0].item() == 0.0


@pytest.mark.parametrize("clip", [None, 0.1, 0.5])
def test_value_loss_matches_loops(clip):
    torch.manual_seed(14)
    v, v_old, R = torch.randn(3, 30, dtype=D).unbind(0)
    out = value_loss(v, v_old, R, clip)
    expected = t(ref_value_loss(v.tolist(), v_old.tolist(), R.tolist(), clip))
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)


# --------------------------------------------------------------------------- aggregate


def test_aggregate_hand_case_all_modes():
    # x = [[1, 2, 3, 4], [5, 6, pad, pad]]  real sum 21 over 6 tokens, B*T = 8
    x = t([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 100.0, -100.0]])
    mask = t([[1, 1, 1, 1], [1, 1, 0, 0]])
    assert aggregate(x, mask, "token_mean").item() == pytest.approx(3.5)              # 21/6
    assert aggregate(x, mask, "seq_mean_token_mean").item() == pytest.approx(4.0)     # (10/4 + 11/2)/2
    assert aggregate(x, mask, "sum_over_constant", 2 * 5).item() == pytest.approx(2.1)   # 21/(B·L_max), L_max 5
    assert aggregate(x, mask, "sum_over_constant", 12).item() == pytest.approx(1.75)     # 21/12
    assert aggregate(x, mask, "sum_over_constant", 0.0).item() == pytest.approx(21.0)    # at least 1
    assert aggregate(x, mask, "token_mean", 12).item() == pytest.approx(3.5)             # the means ignore it
    with pytest.raises(ValueError, match="num_tokens"):
        aggregate(x, mask, "sum_over_constant")
    with pytest.raises(ValueError):
        aggregate(x, mask, "sum")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_aggregate_matches_loops(seed, mode):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    B, T = 5, 9
    x = torch.randn(B, T, dtype=D)
    mask = right_padded_mask(B, T, g)
    num_tokens = 17.0 if mode == "sum_over_constant" else None
    out = aggregate(x, mask, mode, num_tokens)
    expected = ref_aggregate(x.tolist(), mask.tolist(), mode, num_tokens)
    assert out.item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_aggregate_ignores_padding_values_and_gradients(mode):
    torch.manual_seed(15)
    g = torch.Generator().manual_seed(15)
    B, T = 6, 7
    mask = right_padded_mask(B, T, g)
    assert (mask == 0).any()
    x = torch.randn(B, T, dtype=D)
    x2 = torch.where(mask.bool(), x, torch.randn(B, T, dtype=D) * 1e3)
    a, b = x.clone().requires_grad_(), x2.clone().requires_grad_()
    la, lb = aggregate(a, mask, mode, 20.0), aggregate(b, mask, mode, 20.0)
    assert la.item() == lb.item()
    la.backward()
    lb.backward()
    assert torch.equal(a.grad, b.grad)
    assert torch.all(a.grad[mask == 0] == 0)
    assert torch.all(a.grad[mask == 1] != 0)


def test_aggregate_empty_rows_are_finite():
    x = t([[1.0, 2.0], [3.0, 4.0]])
    mask = t([[1, 1], [0, 0]])
    for mode in AGGREGATIONS:
        assert torch.isfinite(aggregate(x, mask, mode, 0.0))
        assert torch.isfinite(aggregate(x, torch.zeros_like(mask), mode, 0.0))


# --------------------------------------------------------------------------- statistics


def test_explained_variance_hand_case():
    # real: V = [1, 2, 3], R = [1, 2, 5] (padding V = 9, R = 0 ignored)
    # R - V = [0, 0, 2]: mean 2/3, population var ((2/3)^2*2 + (4/3)^2)/3 = 8/9
    # R: mean 8/3, population var (25/9 + 4/9 + 49/9)/3 = 26/9
    # EV = 1 - (8/9)/(26/9) = 18/26 = 9/13
    v, R, mask = t([1.0, 2.0, 3.0, 9.0]), t([1.0, 2.0, 5.0, 0.0]), t([1, 1, 1, 0])
    assert explained_variance(v, R, mask) == pytest.approx(9 / 13, abs=1e-12)
    assert explained_variance(R, R, mask) == pytest.approx(1.0, abs=1e-12)           # perfect critic
    assert math.isnan(explained_variance(v, t([2.0, 2.0, 2.0, 7.0]), mask))          # Var[R] = 0
    assert math.isnan(explained_variance(v, R, t([1, 0, 0, 0])))                     # one sample


def test_explained_variance_matches_loops():
    torch.manual_seed(16)
    g = torch.Generator().manual_seed(16)
    R = torch.randn(4, 8, dtype=D)
    v = R + 0.5 * torch.randn(4, 8, dtype=D)
    mask = right_padded_mask(4, 8, g)
    out = explained_variance(v, R, mask)
    assert out == pytest.approx(ref_explained_variance(flat(v.tolist()), flat(R.tolist()),
                                                       flat(mask.tolist())), abs=1e-12)


def test_clip_fractions_hand_case():
    # eps 0.2/0.2, mask excludes the last entry
    #  r    A    low (r<0.8, A<0)   high (r>1.2, A>0)
    # 0.5  -1    1                  0
    # 0.5   1    0                  0
    # 1.5   1    0                  1
    # 1.5  -1    0                  0
    # 1.0   1    0                  0
    # 2.0   1    (padding)          (padding)
    # low = 1/5, high = 1/5, region = 2/5
    ratio = t([0.5, 0.5, 1.5, 1.5, 1.0, 2.0])
    adv = t([-1.0, 1.0, 1.0, -1.0, 1.0, 1.0])
    mask = t([1, 1, 1, 1, 1, 0])
    out = clip_fractions(ratio, adv, mask, 0.2, 0.2)
    assert out == pytest.approx({"clip_frac_low": 0.2, "clip_frac_high": 0.2, "clip_frac": 0.4})
    # asymmetric: eps_high 0.6 -> 1.5 is no longer above 1.6
    out = clip_fractions(ratio, adv, mask, 0.2, 0.6)
    assert out == pytest.approx({"clip_frac_low": 0.2, "clip_frac_high": 0.0, "clip_frac": 0.2})


def test_clip_fractions_matches_loops():
    torch.manual_seed(17)
    g = torch.Generator().manual_seed(17)
    ratio = torch.exp(torch.randn(5, 9, dtype=D) * 0.5)
    adv = torch.randn(5, 9, dtype=D)
    mask = right_padded_mask(5, 9, g)
    out = clip_fractions(ratio, adv, mask, 0.1, 0.3)
    n = low = high = 0
    for r, a, m in zip(flat(ratio.tolist()), flat(adv.tolist()), flat(mask.tolist())):
        if not m:
            continue
        n += 1
        low += r < 0.9 and a < 0
        high += r > 1.3 and a > 0
    assert out["clip_frac_low"] == pytest.approx(low / n, abs=1e-12)
    assert out["clip_frac_high"] == pytest.approx(high / n, abs=1e-12)
    assert out["clip_frac"] == pytest.approx((low + high) / n, abs=1e-12)
    assert low > 0 and high > 0


def test_approx_kl_old_ratio_stats_masked_mean_hand_case():
    # log r = logp - old = [0, ln 2, 5 (padding)]
    # k1 = mean(-log r) = -(ln 2)/2 ; k3 = mean((r-1) - log r) = (0 + 1 - ln 2)/2
    logp, old, mask = t([-1.0, -1.0 + math.log(2), 5.0]), t([-1.0, -1.0, 0.0]), t([1, 1, 0])
    out = approx_kl_old(logp, old, mask)
    assert out["approx_kl_old_k1"] == pytest.approx(-math.log(2) / 2, abs=1e-12)
    assert out["approx_kl_old_k3"] == pytest.approx((1 - math.log(2)) / 2, abs=1e-12)
    rs = ratio_stats(torch.exp(logp - old), mask)
    assert rs == pytest.approx({"ratio_min": 1.0, "ratio_mean": 1.5, "ratio_max": 2.0})
    assert ratio_stats(t([3.0]), t([0])) == {"ratio_min": 1.0, "ratio_mean": 1.0, "ratio_max": 1.0}
    assert masked_mean(t([1.0, 3.0, 100.0]), t([1, 1, 0])).item() == 2.0


# --------------------------------------------------------------------------- sequence_log_ratio (GSPO)


def test_sequence_log_ratio_hand_case_and_gradient():
    # row 0: log ratios 0.5, 0, -1 -> mean -1/6; row 1: one real token, 0.5; row 2: empty -> 0
    nan, inf = math.nan, math.inf
    logp = t([[-1.0, -2.0, -3.0], [-0.5, inf, nan], [-inf, nan, 1.0]]).requires_grad_()
    old = t([[-1.5, -2.0, -2.0], [-1.0, nan, -inf], [nan, inf, 0.0]])
    mask = t([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    out = sequence_log_ratio(logp, old, mask)
    assert out.shape == (3, 1)
    assert torch.allclose(out, t([[-1 / 6], [0.5], [0.0]]), atol=1e-12, rtol=0)
    out.sum().backward()       # d log s_i / d logp_t = m_t / |y_i|: nothing reaches the padding
    assert torch.equal(logp.grad, t([[1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))


def test_gspo_ratio_is_the_geometric_mean_of_the_token_ratios():
    g = torch.Generator().manual_seed(1)
    logp, old = -torch.rand(4, 6, generator=g, dtype=D), -torch.rand(4, 6, generator=g, dtype=D)
    lengths = [6, 3, 1, 4]
    mask = (torch.arange(6)[None, :] < torch.tensor(lengths)[:, None]).to(D)
    s = torch.exp(sequence_log_ratio(logp, old, mask))
    for b, n in enumerate(lengths):
        token_ratios = [math.exp(logp[b, i].item() - old[b, i].item()) for i in range(n)]
        assert s[b, 0].item() == pytest.approx(math.prod(token_ratios) ** (1 / n), rel=1e-12)
    garbage = torch.where(mask.bool(), logp, torch.randn(4, 6, generator=g, dtype=D) * 100)
    assert torch.equal(sequence_log_ratio(garbage, old, mask), sequence_log_ratio(logp, old, mask))


# --------------------------------------------------------------------------- clipped_surrogate: delta


def test_clipped_surrogate_delta_hand_cases():
    # eps = 0.2 (clip range [0.8, 1.2]), delta = 3
    ratio = t([5.0, 2.0, 5.0, 0.5, 0.5, 1.1]).requires_grad_()
    adv = t([-1.0, -1.0, 1.0, 1.0, -1.0, 1.0])
    plain = clipped_surrogate(ratio, adv, 0.2)
    capped = clipped_surrogate(ratio, adv, 0.2, delta=3.0)
    assert torch.allclose(plain, t([5.0, 2.0, -1.2, -0.5, 0.8, -1.1]), atol=1e-12, rtol=0)
    # only the first term changes: Â < 0 with r = 5 > delta is capped at delta · |Â| = 3
    assert torch.allclose(capped, t([3.0, 2.0, -1.2, -0.5, 0.8, -1.1]), atol=1e-12, rtol=0)
    (g_plain,) = torch.autograd.grad(plain.sum(), ratio)
    (g_capped,) = torch.autograd.grad(capped.sum(), ratio)
    assert torch.equal(g_plain, t([1.0, 1.0, 0.0, -1.0, 0.0, -1.0]))
    assert torch.equal(g_capped, t([0.0, 1.0, 0.0, -1.0, 0.0, -1.0]))   # zero above delta where Â < 0


def test_clipped_surrogate_delta_none_is_unchanged_and_positive_advantages_unaffected():
    g = torch.Generator().manual_seed(3)
    ratio = torch.exp(torch.randn(40, generator=g, dtype=D))
    adv = torch.randn(40, generator=g, dtype=D)
    base = clipped_surrogate(ratio, adv, 0.2, 0.28)
    assert torch.equal(clipped_surrogate(ratio, adv, 0.2, 0.28, delta=None), base)
    assert torch.allclose(base, t(ref_clipped_surrogate(ratio.tolist(), adv.tolist(), 0.2, 0.28)),
                          atol=1e-12, rtol=0)
    capped = clipped_surrogate(ratio, adv, 0.2, 0.28, delta=1.5)
    pos = adv > 0
    assert torch.equal(capped[pos], base[pos])                      # Â > 0: the clip at 1 + eps already binds
    big = (adv < 0) & (ratio > 1.5)
    assert big.any()
    assert torch.allclose(capped[big], 1.5 * adv[big].abs(), atol=1e-12, rtol=0)
    assert torch.equal(capped[~big], base[~big])


# --------------------------------------------------------------------------- cispo_loss


def test_cispo_hand_case_gradient_and_detached_weight():
    logp = t([-1.0, -2.0, -0.5, -1.0]).requires_grad_()
    ratio = t([0.5, 3.0, 10.0, 1.0]).requires_grad_()
    adv = t([1.0, -2.0, 1.0, -1.0])
    out = cispo_loss(logp, ratio, adv, max_weight=5.0)
    # weight = min(r, 5) = [0.5, 3, 5, 1]; L = −w · Â · logp
    assert torch.allclose(out, t([0.5, -12.0, 2.5, -1.0]), atol=1e-12, rtol=0)
    g_logp, g_ratio = torch.autograd.grad(out.sum(), [logp, ratio], allow_unused=True)
    assert torch.equal(g_logp, t([-0.5, 6.0, -5.0, 1.0]))            # −min(r, ε_max) · Â
    assert g_ratio is None                                           # nothing flows through the weight


def test_cispo_keeps_the_tokens_ppo_clip_drops():
    # r = exp(logp − old): [0.5, 1.0, 1.5, 8.0] with Â = [−1, 1, 1, 1]; eps = 0.2, ε_max = 4
    logp = t([-1.0, -1.0, -1.0, -1.0]).requires_grad_()
    old = logp.detach() - t([math.log(0.5), 0.0, math.log(1.5), math.log(8.0)])
    adv = t([-1.0, 1.0, 1.0, 1.0])
    ratio = torch.exp(logp - old)
    (g_ppo,) = torch.autograd.grad(clipped_surrogate(ratio, adv, 0.2).sum(), logp)
    (g_cispo,) = torch.autograd.grad(cispo_loss(logp, ratio, adv, 4.0).sum(), logp)
    assert torch.allclose(g_ppo, t([0.0, -1.0, 0.0, 0.0]), atol=1e-12, rtol=0)   # PPO: 3 of 4 tokens dropped
    assert torch.allclose(g_cispo, t([0.5, -1.0, -1.5, -4.0]), atol=1e-12, rtol=0)
    assert (g_cispo != 0).all()


# --------------------------------------------------------------------------- gamma_weight (VESPO)

K_LAMBDA = dict(k_pos=1.5, lambda_pos=2.5, k_neg=2.0, lambda_neg=4.0)


def _phi(log_w: float, k: float, lam: float) -> float:
    return math.exp(lam + k * log_w - lam * math.exp(log_w))


def test_gamma_weight_takes_the_sign_from_the_real_tokens_of_a_row_that_starts_masked():
    """(k, λ) follow the sign of Â on the row's real tokens; a row whose first tokens are masked (left padding,
    an environment's reply) carries Â·m = 0 there and still gets the pair of its own sign."""
    log_ratio = t([[9.0, 9.0, 0.2, 0.1], [0.2, 0.1, 9.0, 9.0], [9.0, 0.2, 0.1, 9.0], [9.0, 0.2, 0.1, 9.0]])
    mask = t([[0, 0, 1, 1], [1, 1, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0]])
    advantages = t([[0.0, 0.0, -1.0, -1.0], [-1.0, -1.0, 0.0, 0.0], [0.0, -0.5, -0.5, 0.0], [0.0, 2.0, 2.0, 0.0]])
    phi = gamma_weight(log_ratio, mask, advantages, **K_LAMBDA)
    negative, positive = _phi(0.3, 2.0, 4.0), _phi(0.3, 1.5, 2.5)
    assert torch.allclose(phi, t([[negative], [negative], [negative], [positive]]), atol=1e-12, rtol=0)
    assert negative != pytest.approx(positive)
    # Â as one column [B, 1] (each row's sequence advantage) gives the same weights
    assert torch.equal(gamma_weight(log_ratio, mask, t([[-1.0], [-1.0], [-0.5], [2.0]]), **K_LAMBDA), phi)
