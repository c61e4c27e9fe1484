"""The GRPO design-space variants of ``ladder.core``: GSPO's sequence ratio, two-sided clipping,
CISPO, leave-one-out advantages, KL in the reward, a moving π_ref, Dr. GRPO's constant
normaliser and DAPO's token count across data-parallel processes."""

from __future__ import annotations

import copy
import math
import os
import socket

import pytest
import torch
from core_loss_refs import D, ref_clipped_surrogate, t
from core_update_helpers import LinearPolicy, make_batch, params_of, same_params, single_thread  # noqa: F401 (autouse fixture)

from ladder.core import (
    Batch,
    UpdateConfig,
    cispo_loss,
    clipped_surrogate,
    compute_loss,
    kl_in_reward,
    leave_one_out,
    sequence_log_ratio,
    soft_update,
    update,
)


class FixedLogp:
    """A "policy" whose log-probs are one leaf tensor: the gradient of the loss per token is ``logp.grad``."""

    def __init__(self, logp: torch.Tensor):
        self.logp = logp.detach().clone().requires_grad_()

    def evaluate(self, batch: Batch):
        return self.logp, None, None


def fixed_batch(mask, advantages, old_logp) -> Batch:
    """A batch for ``FixedLogp``: ``advantages`` per token [B, T] or per row [B]."""
    mask = torch.tensor(mask, dtype=torch.float32)
    adv = torch.tensor(advantages, dtype=torch.float32)
    if adv.dim() == 1:
        adv = adv[:, None].expand(mask.shape).clone()
    return Batch(actions=torch.zeros(mask.shape, dtype=torch.long), mask=mask, advantages=adv,
                 old_logp=torch.tensor(old_logp, dtype=torch.float32))


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


# row 0: token log ratios 0, 0, 1.5 (r = 1, 1, 4.48): GSPO's s = e^0.5 = 1.65 > 1.2, whole row clipped
# row 1: token log ratios 0.1, -0.1 and padding: s = 1, unclipped; its tokens' r = e^±0.1 lie in [0.8, 1.2]
SEQ_LOGP = [[-1.0, -1.0, -1.0], [-1.0, -1.0, 0.0]]
SEQ_OLD = [[-1.0, -1.0, -2.5], [-1.1, -0.9, 7.0]]
SEQ_MASK = [[1, 1, 1], [1, 1, 0]]


def test_compute_loss_sequence_ratio_is_shared_and_clips_whole_rows():
    batch = fixed_batch(SEQ_MASK, [1.0, -1.0], SEQ_OLD)
    N = 5.0
    policy = FixedLogp(torch.tensor(SEQ_LOGP))
    loss, stats, tensors = compute_loss(policy, batch, UpdateConfig(ratio_level="sequence"))
    ratio = tensors["ratio"]
    assert torch.allclose(ratio[0], torch.full((3,), math.exp(0.5)))
    assert torch.allclose(ratio[1, :2], torch.ones(2))     # every real token of a row shares s_i
    # L = [3 · (−1.2 · 1) + 2 · (−1 · −1)] / 5 : row 0 sits on the clip, row 1 is the unclipped s · Â
    assert loss.item() == pytest.approx((3 * -1.2 + 2 * 1.0) / N, rel=1e-6)
    loss.backward()
    # a clipped row: no gradient at all; an unclipped row: −Â · s / N on every real token
    assert torch.equal(policy.logp.grad[0], torch.zeros(3))
    assert torch.allclose(policy.logp.grad[1], torch.tensor([1 / N, 1 / N, 0.0]), atol=1e-7)

    token = FixedLogp(torch.tensor(SEQ_LOGP))
    loss, _, tensors = compute_loss(token, batch, UpdateConfig(ratio_level="token"))
    loss.backward()
    r = tensors["ratio"]
    # token level clips only the one token with r = e^1.5; the other two of row 0 keep −Â · r_t / N
    expected = torch.tensor([[-1 / N, -1 / N, 0.0], [r[1, 0].item() / N, r[1, 1].item() / N, 0.0]])
    assert torch.allclose(token.logp.grad, expected, atol=1e-7)


def test_update_sequence_ratio_drops_clipped_rows_that_token_level_keeps():
    # Every row: first token r = 1, the others r = e (log ratio 1): s_i = e^((n−1)/n) ≥ e^0.5 > 1.2,
    # Â > 0, so GSPO clips every row and the step is zero; token level still learns from column 0.
    def run(level):
        policy = LinearPolicy(critic=False, seed=21)
        batch = make_batch(policy, B=6, T=4, seed=21, old_logp=True)
        batch.mask = (torch.arange(4)[None, :] < torch.tensor([2, 4, 3, 2, 4, 3])[:, None]).float()
        batch.old_logp[:, 1:] -= 1.0
        batch.advantages = batch.advantages.abs() + 0.1
        before = params_of(policy)
        stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=1.0),
                       UpdateConfig(ratio_level=level, max_grad_norm=None))[0]
        return before, params_of(policy), stats

    before, after, stats = run("sequence")
    assert same_params(before, after)
    assert stats["clip_frac"] == 1.0
    before, after, stats = run("token")
    assert not same_params(before, after)
    assert 0 < stats["clip_frac"] < 1


@pytest.mark.parametrize("objective,level", [("clipped", "sequence"), ("cispo", "token"), ("cispo", "sequence")])
def test_update_variants_ignore_finite_garbage_in_padding(objective, level):
    def run(batch):
        policy = LinearPolicy(seed=22)
        cfg = UpdateConfig(mu=2, num_minibatches=2, objective=objective, ratio_level=level, cispo_max_weight=1.1,
                           kl_coef=0.1, value_clip=0.3)
        update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.3), cfg,
               generator=torch.Generator().manual_seed(2))
        return params_of(policy)

    base = make_batch(LinearPolicy(seed=22), B=8, T=5, seed=22, ref=True, old_logp=True)
    g = torch.Generator().manual_seed(220)
    base.old_logp += 0.3 * torch.randn(base.old_logp.shape, generator=g)
    pad = base.mask == 0
    noisy = copy.deepcopy(base)
    for name in ("advantages", "values", "returns", "old_logp", "ref_logp"):
        x = getattr(noisy, name)
        setattr(noisy, name, torch.where(pad, x + 5 * torch.randn(x.shape, generator=g), x))
    for a, b in zip(run(copy.deepcopy(base)), run(noisy)):
        assert torch.allclose(a, b, atol=1e-7, rtol=0)


@pytest.mark.parametrize("objective,level", [("clipped", "token"), ("clipped", "sequence"), ("cispo", "token"),
                                             ("reinforce", "token")])
def test_non_finite_advantages_in_padding_never_reach_the_gradient(objective, level):
    policy = LinearPolicy(seed=23)
    batch = make_batch(policy, B=6, T=5, seed=23, ref=True, old_logp=True)
    batch.advantages = torch.where(batch.mask == 0, torch.full_like(batch.advantages, math.nan), batch.advantages)
    cfg = UpdateConfig(objective=objective, ratio_level=level, kl_coef=0.1, max_grad_norm=None)
    stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.1), cfg)[0]
    assert stats["skipped_steps"] == 0 and math.isfinite(stats["grad_norm"])


def test_update_rejects_unknown_ratio_level_and_objective():
    policy = LinearPolicy(seed=23)
    batch = make_batch(policy, B=2, T=3, seed=23)
    with pytest.raises(ValueError, match="ratio_level"):
        compute_loss(policy, batch, UpdateConfig(ratio_level="row"))
    with pytest.raises(ValueError, match="objective"):
        compute_loss(policy, batch, UpdateConfig(objective="gspo"))


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


def test_compute_loss_passes_delta():
    # two tokens, Â = −1: r = e^2 = 7.39 (capped at delta = 4) and r = 1; token_mean over 2
    batch = fixed_batch([[1, 1]], [-1.0], [[-3.0, -1.0]])
    capped = FixedLogp(torch.tensor([[-1.0, -1.0]]))
    loss, _, _ = compute_loss(capped, batch, UpdateConfig(delta=4.0))
    assert loss.item() == pytest.approx((4.0 + 1.0) / 2, rel=1e-6)
    loss.backward()
    assert torch.allclose(capped.logp.grad, torch.tensor([[0.0, 0.5]]))
    plain = FixedLogp(torch.tensor([[-1.0, -1.0]]))
    loss, _, _ = compute_loss(plain, batch, UpdateConfig())
    assert loss.item() == pytest.approx((math.exp(2) + 1.0) / 2, rel=1e-6)
    loss.backward()
    assert torch.allclose(plain.logp.grad, torch.tensor([[math.exp(2) / 2, 0.5]]))


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


def test_compute_loss_cispo_objective():
    batch = fixed_batch([[1, 1, 0]], [2.0], [[-1.0 - math.log(8.0), -1.0, 0.0]])
    policy = FixedLogp(torch.tensor([[-1.0, -1.0, math.nan]]))
    loss, _, _ = compute_loss(policy, batch, UpdateConfig(objective="cispo", cispo_max_weight=3.0))
    # weights min(8, 3) = 3 and 1: L = −(3 · 2 · −1 + 1 · 2 · −1) / 2 = 4
    assert loss.item() == pytest.approx(4.0, rel=1e-6)
    loss.backward()
    assert torch.allclose(policy.logp.grad, torch.tensor([[-3.0, -1.0, 0.0]]))


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


# --------------------------------------------------------------------------- soft_update


def test_soft_update_alpha_one_zero_and_half():
    policy, start = LinearPolicy(seed=30), LinearPolicy(seed=31)
    theta = params_of(policy)

    ref = copy.deepcopy(start)
    soft_update(ref.parameters(), policy.parameters(), 1.0)
    assert same_params(params_of(ref), theta)                  # an exact copy

    ref = copy.deepcopy(start)
    soft_update(ref.parameters(), policy.parameters(), 0.0)
    assert same_params(params_of(ref), params_of(start))       # bit-identical

    ref = copy.deepcopy(start)
    soft_update(ref.parameters(), policy.parameters(), 0.5)
    for r, a, b in zip(ref.parameters(), start.parameters(), theta):
        assert torch.allclose(r, (a + b) / 2, atol=1e-7, rtol=0)
    assert same_params(params_of(policy), theta)               # π_θ itself untouched


def test_soft_update_rejects_mismatched_lists():
    ref, policy = LinearPolicy(seed=32), LinearPolicy(seed=33, critic=False)
    before = params_of(ref)
    with pytest.raises(ValueError):
        soft_update(ref.parameters(), policy.parameters(), 0.5)
    assert same_params(params_of(ref), before)


# --------------------------------------------------------------------------- sum_over_constant: N given


def widen(batch: Batch, extra: int, seed: int) -> Batch:
    """Append ``extra`` all-padding columns holding random (finite) data, as a longer completion elsewhere would."""
    g = torch.Generator().manual_seed(seed)
    B, T = batch.mask.shape
    out = copy.deepcopy(batch)
    for name in ("advantages", "values", "returns", "old_logp", "ref_logp"):
        x = getattr(out, name)
        if x is not None:
            setattr(out, name, torch.cat([x, torch.randn(B, extra, generator=g)], dim=1))
    out.actions = torch.cat([out.actions, torch.zeros(B, extra, dtype=out.actions.dtype)], dim=1)
    out.mask = torch.cat([out.mask, torch.zeros(B, extra)], dim=1)
    obs = out.inputs["obs"]
    out.inputs["obs"] = torch.cat([obs, torch.randn(B, extra, obs.shape[-1], generator=g)], dim=1)
    return out


def test_a_constant_normaliser_makes_the_loss_independent_of_the_width():
    policy = LinearPolicy(seed=40)
    narrow = make_batch(policy, B=6, T=5, seed=40, ref=True, old_logp=True)
    narrow.old_logp += 0.3 * torch.randn(narrow.old_logp.shape, generator=torch.Generator().manual_seed(41))
    wide = widen(narrow, 3, seed=42)

    def loss_and_grad(batch, num_tokens):
        p = copy.deepcopy(policy)
        loss, _, _ = compute_loss(p, batch, cfg, num_tokens)
        loss.backward()
        return loss.item(), [q.grad.clone() for q in p.parameters()]

    cfg = UpdateConfig(aggregation="sum_over_constant", kl_coef=0.1, entropy_coef=0.01)
    (l5, g5), (l8, g8) = loss_and_grad(narrow, 6 * 8), loss_and_grad(wide, 6 * 8)  # Dr. GRPO: B · L_max, L_max 8
    assert l5 == pytest.approx(l8, rel=1e-6)
    for a, b in zip(g5, g8):
        assert torch.allclose(a, b, atol=1e-7, rtol=1e-6)
    # dividing by the padded B · T instead: the same sums over 6 · 5 and 6 · 8
    (m5, h5), (m8, h8) = loss_and_grad(narrow, 6 * 5), loss_and_grad(wide, 6 * 8)
    assert m5 == pytest.approx(l5 * 8 / 5, rel=1e-6)
    assert m8 == pytest.approx(l8, rel=1e-6)
    assert m5 != pytest.approx(m8, rel=1e-3)
    for a, b in zip(h5, h8):
        assert torch.allclose(a * 5, b * 8, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("num_tokens", [8 * 7, 10.0])  # rows · L_max (Dr. GRPO: len(mb) · 7 each); a token count
def test_num_tokens_is_shared_over_minibatches(num_tokens):
    # lr = 0: the policy does not move; each minibatch's REINFORCE loss is Σ m·(−Â·logp) / (N / 2)
    policy = LinearPolicy(critic=False, seed=50)
    batch = make_batch(policy, B=8, T=5, seed=50)
    cfg = UpdateConfig(num_minibatches=2, objective="reinforce", aggregation="sum_over_constant")
    stats = update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.0), cfg,
                   generator=torch.Generator().manual_seed(5), num_tokens=num_tokens)[0]
    losses = []
    with torch.no_grad():
        for mb in batch.minibatches(2, torch.Generator().manual_seed(5)):
            x = -mb.advantages * policy.evaluate(mb)[0]
            losses.append((x * mb.mask).sum().item() / (num_tokens / 2))
    assert stats["loss_pg"] == pytest.approx(sum(losses) / 2, rel=1e-5)
    with pytest.raises(ValueError, match="num_tokens"):   # the constant is the caller's: never guessed
        update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.0), cfg)


def test_a_constant_normaliser_update_is_independent_of_the_width():
    def run(batch):
        policy = LinearPolicy(seed=44)
        cfg = UpdateConfig(mu=2, num_minibatches=2, aggregation="sum_over_constant", kl_coef=0.1)
        update(policy, batch, torch.optim.SGD(policy.parameters(), lr=0.5), cfg,
               generator=torch.Generator().manual_seed(3), num_tokens=8 * 9)
        return params_of(policy)

    narrow = make_batch(LinearPolicy(seed=44), B=8, T=6, seed=44, ref=True, old_logp=True)
    for a, b in zip(run(copy.deepcopy(narrow)), run(widen(narrow, 3, seed=45))):
        assert torch.allclose(a, b, atol=1e-6, rtol=0)


# --------------------------------------------------------------------------- DAPO's N: the whole batch's tokens


# Four rows: the first two (process 0) hold 6 + 5 = 11 active tokens, the last two (process 1) 1 + 2 = 3.
DAPO_LENGTHS = [6, 5, 1, 2]
DAPO_CFG = dict(mu=2, aggregation="sum_over_constant", max_grad_norm=None, value_coef=0.5, entropy_coef=0.01)


class DDPLinearPolicy(LinearPolicy):
    """DistributedDataParallel calls ``forward``: make it ``evaluate``."""

    def forward(self, batch: Batch):
        return self.evaluate(batch)


def dapo_setup() -> tuple[DDPLinearPolicy, Batch]:
    policy = DDPLinearPolicy(seed=60)
    batch = make_batch(policy, B=4, T=6, seed=60, old_logp=True)
    batch.mask = (torch.arange(6)[None, :] < torch.tensor(DAPO_LENGTHS)[:, None]).float()
    batch.old_logp += 0.3 * torch.randn(batch.old_logp.shape, generator=torch.Generator().manual_seed(61))
    return policy, batch


def _dapo_worker(rank: int, port: int, out_dir: str) -> None:
    from ladder.distributed import Processes

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank),
                      LOCAL_RANK=str(rank))
    procs = Processes(torch.device("cpu"))
    policy, batch = dapo_setup()
    local = batch.select(torch.arange(2 * rank, 2 * rank + 2))
    out = {"local_tokens": local.num_tokens}
    for name, num_tokens in (("global", sum(DAPO_LENGTHS) / 2), ("local", float(local.num_tokens))):
        p = copy.deepcopy(policy)
        update(procs.wrap(p), copy.deepcopy(local), torch.optim.SGD(p.parameters(), lr=1.0), UpdateConfig(**DAPO_CFG),
               num_tokens=num_tokens)
        out[name] = params_of(p)
    torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
def test_dapo_two_processes_match_one_process_on_the_whole_batch(tmp_path):
    import multiprocessing

    import torch.multiprocessing as mp

    policy, batch = dapo_setup()
    before = params_of(policy)
    update(policy, batch, torch.optim.SGD(policy.parameters(), lr=1.0), UpdateConfig(**DAPO_CFG),
           num_tokens=float(sum(DAPO_LENGTHS)))
    whole = params_of(policy)
    assert not same_params(before, whole)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Not fork: a child forked from a process whose OpenMP pool has run hangs in its first parallel op.
    # A fork server imports torch and DistributedDataParallel's torch._dynamo once, for both children.
    multiprocessing.set_forkserver_preload(["torch", "torch._dynamo", "ladder.core", "ladder.distributed"])
    mp.start_processes(_dapo_worker, args=(port, str(tmp_path)), nprocs=2, start_method="forkserver")
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]

    assert [r["local_tokens"] for r in results] == [11, 3]
    for r in results:
        for a, b in zip(r["global"], whole):
            assert torch.allclose(a, b, atol=1e-6, rtol=0)
    # each process dividing by its own count weights process 1's 3 tokens like process 0's 11: wrong
    assert same_params(results[0]["local"], results[1]["local"])      # still in step with each other
    diff = max((a - b).abs().max().item() for a, b in zip(results[0]["local"], whole))
    assert diff > 1e-3
