"""KL estimators (k1, k2, k3, importance-weighted), KL-shaped rewards and the KL controllers."""

from __future__ import annotations

import math

import pytest
import torch
from core_loss_refs import D, E, ref_kl, ref_last_step, right_padded_mask, t

from ladder.core import (
    AdaptiveKLController,
    FixedKLController,
    kl_estimate,
    kl_in_reward,
    kl_penalized_rewards,
    last_step_mask,
)

# --------------------------------------------------------------------------- kl_estimate


# logp = [-1, -2, -0.5], ref = [-2, -1, -0.5]  ->  ell = ref - logp = [-1, 1, 0]
LOGP = [-1.0, -2.0, -0.5]
REF = [-2.0, -1.0, -0.5]
# old = [-1.5, -2, 0]  ->  w = exp(logp - old) = [e^0.5, 1, e^-0.5]
OLD = [-1.5, -2.0, 0.0]


@pytest.mark.parametrize("estimator,plain,weighted", [
    # k1 = -ell = [1, -1, 0];                weighted: [e^0.5, -1, 0]
    ("k1", [1.0, -1.0, 0.0], [E ** 0.5, -1.0, 0.0]),
    # k2 = ell^2/2 = [0.5, 0.5, 0];          weighted: [0.5 e^0.5, 0.5, 0]
    ("k2", [0.5, 0.5, 0.0], [0.5 * E ** 0.5, 0.5, 0.0]),
    # k3 = e^ell - 1 - ell = [e^-1, e - 2, 0]; weighted: [e^-1 * e^0.5 = e^-0.5, e - 2, 0]
    ("k3", [E ** -1, E - 2.0, 0.0], [E ** -0.5, E - 2.0, 0.0]),
])
def test_kl_estimate_hand_case(estimator, plain, weighted):
    out = kl_estimate(t(LOGP), t(REF), estimator)
    assert torch.allclose(out, t(plain), atol=1e-12, rtol=0)
    out_w = kl_estimate(t(LOGP), t(REF), estimator, old_logp=t(OLD))
    assert torch.allclose(out_w, t(weighted), atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_estimate_matches_loops(seed, estimator):
    torch.manual_seed(seed)
    logp, ref, old = torch.randn(3, 3, 7, dtype=D).unbind(0)
    out = kl_estimate(logp, ref, estimator)
    assert torch.allclose(out.flatten(), t(ref_kl(logp.flatten().tolist(), ref.flatten().tolist(),
                                                    estimator)), atol=1e-12, rtol=0)
    out_w = kl_estimate(logp, ref, estimator, old_logp=old)
    exp_w = ref_kl(logp.flatten().tolist(), ref.flatten().tolist(), estimator, old.flatten().tolist())
    assert torch.allclose(out_w.flatten(), t(exp_w), atol=1e-12, rtol=0)


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_weighted_equals_plain_on_policy_and_differs_off_policy(estimator):
    torch.manual_seed(7)
    logp, ref = torch.randn(4, 6, dtype=D), torch.randn(4, 6, dtype=D)
    plain = kl_estimate(logp, ref, estimator)
    assert torch.equal(kl_estimate(logp, ref, estimator, old_logp=logp.clone()), plain)
    off = kl_estimate(logp, ref, estimator, old_logp=logp - 0.3)   # weight e^0.3 everywhere
    assert not torch.allclose(off, plain)
    assert torch.allclose(off, math.exp(0.3) * plain, atol=1e-12, rtol=0)


def test_kl_k2_k3_nonnegative_k1_can_be_negative():
    torch.manual_seed(8)
    logp, ref, old = (torch.randn(3, 50, 20, dtype=D) * 3).unbind(0)
    for est in ("k2", "k3"):
        assert (kl_estimate(logp, ref, est) >= 0).all()
        assert (kl_estimate(logp, ref, est, old_logp=old) >= 0).all()
    assert (kl_estimate(logp, ref, "k1") < 0).any()


def test_kl_weighted_k3_gradient_is_score_function_gradient():
    # At logp == old_logp, d/dlogp [w * k3] = k3 + (1 - e^ell) = -ell = logp - ref: the gradient
    # of KL(pi||ref) for a sampled action. A detached weight would give 1 - e^ell instead.
    torch.manual_seed(9)
    logp = torch.randn(10, dtype=D, requires_grad=True)
    ref = torch.randn(10, dtype=D)
    kl_estimate(logp, ref, "k3", old_logp=logp.detach()).sum().backward()
    assert torch.allclose(logp.grad, (logp - ref).detach(), atol=1e-12, rtol=0)


def test_kl_estimate_bad_estimator_raises():
    with pytest.raises(ValueError):
        kl_estimate(t(LOGP), t(REF), "k4")


# --------------------------------------------------------------------------- kl_penalized_rewards


def test_kl_penalized_rewards_hand_case():
    # beta = 0.1, k1 = logp - ref
    # row 0 (3 real): k1 = [-1-(-2), -2-(-1), 0] = [1, -1, 0] -> r = [-0.1, 0.1, 0 + score 2] = [-0.1, 0.1, 2]
    # row 1 (1 real): k1 = [-1-(-1.5)] = [0.5], padding ref = 7 ignored -> r = [-0.05 + (-1), 0, 0]
    scores = t([2.0, -1.0])
    logp = t([[-1.0, -2.0, -0.5], [-1.0, -1.0, -1.0]])
    ref = t([[-2.0, -1.0, -0.5], [-1.5, 7.0, 7.0]])
    mask = t([[1, 1, 1], [1, 0, 0]])
    rewards, kl = kl_penalized_rewards(scores, logp, ref, mask, kl_coef=0.1, estimator="k1")
    assert torch.allclose(rewards, t([[-0.1, 0.1, 2.0], [-1.05, 0.0, 0.0]]), atol=1e-12, rtol=0)
    assert torch.allclose(kl, t([[1.0, -1.0, 0.0], [0.5, 0.0, 0.0]]), atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_kl_penalized_rewards_matches_loops(seed, estimator):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    B, T, beta = 6, 8, 0.05
    scores = torch.randn(B, dtype=D)
    logp, ref = torch.randn(B, T, dtype=D), torch.randn(B, T, dtype=D)
    mask = right_padded_mask(B, T, g, min_len=0)
    rewards, kl = kl_penalized_rewards(scores, logp, ref, mask, beta, estimator)
    for b in range(B):
        length = int(mask[b].sum())
        for i in range(T):
            if i >= length:
                assert rewards[b, i].item() == 0.0 and kl[b, i].item() == 0.0
                continue
            k = ref_kl([logp[b, i].item()], [ref[b, i].item()], estimator)[0]
            expected = -beta * k + (scores[b].item() if i == length - 1 else 0.0)
            assert kl[b, i].item() == pytest.approx(k, abs=1e-12)
            assert rewards[b, i].item() == pytest.approx(expected, abs=1e-12)
    # the score appears once per non-empty row, on its last real token
    non_empty = mask.sum(1) > 0
    recovered = (rewards + beta * kl).sum(1)
    assert torch.allclose(recovered[non_empty], scores[non_empty], atol=1e-12, rtol=0)


# --------------------------------------------------------------------------- last_step_mask


def test_last_step_mask_hand_case():
    mask = t([[1, 1, 0], [1, 1, 1], [0, 0, 0], [1, 0, 0]])
    expected = t([[0, 1, 0], [0, 0, 1], [0, 0, 0], [1, 0, 0]])
    assert torch.equal(last_step_mask(mask), expected)


def test_last_step_mask_matches_loops():
    g = torch.Generator().manual_seed(10)
    mask = right_padded_mask(12, 9, g, min_len=0)
    assert torch.equal(last_step_mask(mask), t(ref_last_step(mask.tolist())))
    assert torch.equal(last_step_mask(mask.long()), t(ref_last_step(mask.tolist())).long())


# --------------------------------------------------------------------------- KL controllers


def test_adaptive_kl_controller_hand_case():
    # beta = 0.1, target 6, horizon 10000, n_steps 100 -> e * 0.01
    c = AdaptiveKLController(0.1, target=6.0, horizon=10000)
    # KL 12: e = clip(12/6 - 1 = 1, +-0.2) = 0.2  -> beta = 0.1 * 1.002 = 0.1002
    assert c.update(12.0, 100) == pytest.approx(0.1002, abs=1e-15)
    # KL 3: e = clip(-0.5) = -0.2                 -> beta = 0.1002 * 0.998 = 0.0999996
    assert c.update(3.0, 100) == pytest.approx(0.0999996, abs=1e-15)
    # KL 6.6: e = 0.1 (inside the clip)            -> beta = 0.0999996 * 1.001 = 0.1000995996
    assert c.update(6.6, 100) == pytest.approx(0.1000995996, abs=1e-15)
    # KL = target: e = 0, unchanged
    assert c.update(6.0, 100) == pytest.approx(0.1000995996, abs=1e-15)
    # non-finite KL: unchanged
    assert c.update(float("nan"), 100) == pytest.approx(0.1000995996, abs=1e-15)
    assert c.value == pytest.approx(0.1000995996, abs=1e-15)


def test_adaptive_kl_controller_matches_loop_and_state_dict():
    g = torch.Generator().manual_seed(11)
    kls = (torch.rand(50, generator=g, dtype=D) * 20).tolist()
    steps = torch.randint(1, 500, (50,), generator=g).tolist()
    c = AdaptiveKLController(0.2, target=6.0, horizon=10000)
    beta = 0.2
    for kl, n in zip(kls, steps):
        e = min(max(kl / 6.0 - 1.0, -0.2), 0.2)
        beta = beta * (1.0 + e * n / 10000)
        assert c.update(kl, n) == pytest.approx(beta, rel=1e-12)
    c2 = AdaptiveKLController(1.0, target=6.0, horizon=10000)
    c2.load_state_dict(c.state_dict())
    assert c2.value == c.value


def test_fixed_kl_controller():
    c = FixedKLController(0.05)
    for kl, n in [(0.0, 1), (100.0, 1000), (float("nan"), 5)]:
        assert c.update(kl, n) == 0.05
    c.load_state_dict({"value": 0.3})
    assert c.value == 0.3 and c.state_dict() == {"value": 0.3}


# --------------------------------------------------------------------------- kl_in_reward


def test_kl_in_reward_hand_case_k1_k3_padding_and_no_gradient():
    old = t([[-1.0, -2.0, -3.0], [-0.5, -1.0, math.nan]]).requires_grad_()
    ref = t([[-1.5, -1.0, -3.0], [-1.0, -1.0, math.inf]])
    mask = t([[1, 1, 1], [1, 1, 0]])
    rewards = t([1.0, 2.0])
    shaped, kl = kl_in_reward(rewards, old, ref, mask, kl_coef=0.1, estimator="k1")
    # k1 = old − ref: row 0: 0.5 − 1 + 0 = −0.5; row 1: 0.5 + 0 (padding ignored, even NaN/inf)
    assert torch.allclose(kl, t([-0.5, 0.5]), atol=1e-12, rtol=0)
    assert torch.allclose(shaped, t([1.05, 1.95]), atol=1e-12, rtol=0)
    assert not kl.requires_grad and not shaped.requires_grad      # a constant: θ is reached only via Â

    shaped, kl = kl_in_reward(rewards, old, ref, mask, kl_coef=0.1, estimator="k3")

    def k3(ell):
        return math.expm1(ell) - ell                                 # ell = ref − old

    row0, row1 = k3(-0.5) + k3(1.0) + k3(0.0), k3(-0.5) + k3(0.0)
    assert torch.allclose(kl, t([row0, row1]), atol=1e-12, rtol=0)
    assert torch.allclose(shaped, rewards - 0.1 * t([row0, row1]), atol=1e-12, rtol=0)
    assert not shaped.requires_grad
    with pytest.raises(ValueError, match="estimator"):
        kl_in_reward(rewards, old, ref, mask, 0.1, estimator="k4")
