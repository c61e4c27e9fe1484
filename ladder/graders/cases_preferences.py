"""The cases of the preference exercises (26, 27): the Bradley–Terry loss of a reward model's scores, and DPO's loss of
the policy's and the reference's sequence log-probs."""

from __future__ import annotations

import torch

from .cases import Case, pick, randn, t


def bradley_terry_loss() -> list[Case]:
    grad = ("chosen_rewards", "rejected_rewards")
    cases = [
        Case("every pair a tie: log 2, and each score pulled by ½ / B",
             dict(chosen_rewards=t([0.5, -1.0, 3.0]), rejected_rewards=t([0.5, -1.0, 3.0])), grad=grad),
        Case("gaps 2, 0, −2: the pair ranked wrong pulls hardest",
             dict(chosen_rewards=t([2.0, 0.0, -1.0]), rejected_rewards=t([0.0, 0.0, 1.0])), grad=grad),
        Case("only the gap counts: the same pairs, every score shifted by 100",
             dict(chosen_rewards=t([102.0, 100.0, 99.0]), rejected_rewards=t([100.0, 100.0, 101.0])), grad=grad),
        Case("a pair ranked wrong by 120: −log σ(−120) = 120, finite (σ(−120) underflows in float32)",
             dict(chosen_rewards=t([-60.0, 1.0]), rejected_rewards=t([60.0, 0.0])), grad=grad),
        Case("a pair ranked right by 120: its loss and pull are ≈ 0",
             dict(chosen_rewards=t([60.0, 0.0]), rejected_rewards=t([-60.0, 1.0])), grad=grad),
        Case("a margin of 1 on each pair: the gap must pass m before the pair lets go",
             dict(chosen_rewards=t([2.0, 0.5]), rejected_rewards=t([0.0, 0.0]), margin=t([1.0, 1.0])), grad=grad),
        Case("margins of several sizes, one of them 0",
             dict(chosen_rewards=t([1.0, 1.0, 1.0]), rejected_rewards=t([0.0, 0.0, 0.0]), margin=t([0.0, 1.0, 3.0])),
             grad=grad),
        Case("one pair", dict(chosen_rewards=t([0.3]), rejected_rewards=t([-0.2])), grad=grad),
    ]
    g = torch.Generator().manual_seed(26)
    for _ in range(6):
        B = pick(g, (1, 2, 4, 7))
        inputs = dict(chosen_rewards=randn(g, B, scale=2.0), rejected_rewards=randn(g, B, scale=2.0))
        if pick(g, (True, False)):
            inputs["margin"] = torch.rand(B, generator=g) * 2
        cases.append(Case(f"random: {B} pairs{' with margins' if 'margin' in inputs else ''}", inputs, grad=grad))
    return cases


def dpo_loss() -> list[Case]:
    grad = ("chosen_logp", "rejected_logp")
    logp_w, logp_l = t([-10.0, -12.0]), t([-11.0, -9.0])
    cases = [
        Case("π_θ = π_ref: every implicit reward 0, the loss log 2 (β = 0.1)",
             dict(chosen_logp=logp_w, rejected_logp=logp_l, ref_chosen_logp=logp_w, ref_rejected_logp=logp_l,
                  beta=0.1), grad=grad),
        Case("the sheet's example: β = ½, one pair ranked right by r̂ and one wrong",
             dict(chosen_logp=logp_w, rejected_logp=logp_l, ref_chosen_logp=t([-10.5, -12.0]),
                  ref_rejected_logp=t([-10.5, -10.0]), beta=0.5), grad=grad),
        Case("the same log-probs at β = 2: β scales the implicit rewards inside σ",
             dict(chosen_logp=logp_w, rejected_logp=logp_l, ref_chosen_logp=t([-10.5, -12.0]),
                  ref_rejected_logp=t([-10.5, -10.0]), beta=2.0), grad=grad),
        Case("π_θ more likely than π_ref on both completions by the same amount: r̂_w = r̂_l, log 2",
             dict(chosen_logp=t([-5.0]), rejected_logp=t([-7.0]), ref_chosen_logp=t([-6.0]),
                  ref_rejected_logp=t([-8.0]), beta=0.3), grad=grad),
        Case("y_l more likely than y_w under both policies: only the ratios to π_ref count, not the log-probs",
             dict(chosen_logp=t([-20.0]), rejected_logp=t([-3.0]), ref_chosen_logp=t([-22.0]),
                  ref_rejected_logp=t([-3.0]), beta=0.5), grad=grad),
        Case("far apart (β·gap = −150): −log σ stays finite",
             dict(chosen_logp=t([-400.0, -5.0]), rejected_logp=t([-5.0, -5.0]), ref_chosen_logp=t([-100.0, -5.0]),
                  ref_rejected_logp=t([-5.0, -4.0]), beta=0.5), grad=grad),
    ]
    g = torch.Generator().manual_seed(27)
    for _ in range(6):
        B = pick(g, (1, 2, 3, 5))
        ref_w, ref_l = -10 * torch.rand(B, generator=g) - 1, -10 * torch.rand(B, generator=g) - 1
        inputs = dict(chosen_logp=ref_w + randn(g, B), rejected_logp=ref_l + randn(g, B), ref_chosen_logp=ref_w,
                      ref_rejected_logp=ref_l, beta=pick(g, (0.05, 0.1, 0.5, 1.0)))
        cases.append(Case(f"random: {B} pairs, β = {inputs['beta']}", inputs, grad=grad))
    return cases


PREFERENCE_CASES = {"ex26_bradley_terry": bradley_terry_loss, "ex27_dpo_loss": dpo_loss}
