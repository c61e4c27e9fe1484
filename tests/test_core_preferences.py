"""The preference losses against their equations: Bradley–Terry on a reward model's scores, DPO on sequence
log-probs — what each is at a tie, on a hand-computed pair, and the normaliser Z(x) that cancels in DPO."""

from __future__ import annotations

import math

import pytest
import torch

from ladder import core


def test_sequence_logp_sums_the_completions_tokens_only():
    token_logp = torch.tensor([[-1.0, -2.0, -4.0], [-0.5, -0.25, -8.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    assert core.sequence_logp(token_logp, mask).tolist() == [-3.0, -8.75]


def test_bradley_terry_at_a_tie_and_on_a_hand_computed_pair():
    chosen = torch.tensor([0.0, math.log(3.0)], requires_grad=True)
    rejected = torch.tensor([0.0, 0.0])
    loss = core.bradley_terry_loss(chosen, rejected)
    stats = core.pair_statistics(chosen, rejected)
    # −log σ(0) = log 2; σ(log 3) = 3/4, −log(3/4) = log(4/3)
    assert loss.item() == pytest.approx((math.log(2.0) + math.log(4.0 / 3.0)) / 2)
    loss.backward()
    # ∂/∂r_w of −log σ(r_w − r_l), over B = 2 pairs: −(1 − σ(Δ)) / 2
    assert chosen.grad.tolist() == pytest.approx([-0.25, -0.125])
    assert stats["accuracy"].item() == 0.5 and stats["margin"].item() == pytest.approx(math.log(3.0) / 2)
    assert not stats["margin"].requires_grad


def test_a_margin_asks_for_a_wider_gap():
    chosen, rejected = torch.tensor([1.0]), torch.tensor([0.0])
    without = core.bradley_terry_loss(chosen, rejected)
    with_margin = core.bradley_terry_loss(chosen, rejected, margin=torch.tensor([1.0]))
    assert with_margin.item() == pytest.approx(math.log(2.0)) and without.item() < with_margin.item()


def test_dpo_starts_at_log_2_with_zero_implicit_rewards():
    logp = torch.tensor([-5.0, -7.0])
    loss = core.dpo_loss(logp, logp - 1, logp, logp - 1, beta=0.1)
    assert loss.item() == pytest.approx(math.log(2.0))
    assert core.implicit_reward(logp, logp, beta=0.1).tolist() == [0.0, 0.0]


def test_dpo_is_bradley_terry_on_the_implicit_reward_and_z_cancels():
    generator = torch.Generator().manual_seed(0)
    chosen, rejected, ref_chosen, ref_rejected = (-10 * torch.rand(4, generator=generator) for _ in range(4))
    beta = 0.3
    loss = core.dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta)
    bt = core.bradley_terry_loss(core.implicit_reward(chosen, ref_chosen, beta),
                                    core.implicit_reward(rejected, ref_rejected, beta))
    assert loss.item() == pytest.approx(bt.item())
    log_z = torch.randn(4, generator=generator)  # a per-prompt constant: r̂ shifts by β·log Z for both completions
    shifted = core.dpo_loss(chosen + log_z, rejected + log_z, ref_chosen, ref_rejected, beta)
    assert shifted.item() == pytest.approx(loss.item())
