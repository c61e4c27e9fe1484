"""The cases of TRL 1.16's design-space exercises (24, 25): SAPO's soft gate on the ratio, and GDPO's
advantages from several rewards, each normalised within its group before they are summed."""

from __future__ import annotations

import torch

from .cases import Case, pick, randn, shapes, t


def soft_gated_surrogate() -> list[Case]:
    ones = torch.ones(1, 4)
    cases = [
        Case("ρ = 1: L = −(4/τ)·½·Â and the slope −Â whatever τ (Â of both signs, τ_pos = 1, τ_neg = 1.05)",
             dict(ratio=ones, advantages=t([[2, -1, 0.5, -3]]), temp_pos=1.0, temp_neg=1.05), grad=("ratio",)),
        Case("τ by the sign of Â: τ_pos = 1 where Â > 0, τ_neg = 3 where Â < 0, at the same ratios",
             dict(ratio=t([[0.8, 1.3, 0.8, 1.3]]), advantages=t([[1, 1, -1, -1]]), temp_pos=1.0, temp_neg=3.0),
             grad=("ratio",)),
        Case("τ_pos > τ_neg: the positive side fades faster (τ_pos = 4, τ_neg = 0.5)",
             dict(ratio=t([[1.5, 0.6, 1.5, 0.6]]), advantages=t([[0.7, 0.7, -0.7, -0.7]]), temp_pos=4.0,
                  temp_neg=0.5), grad=("ratio",)),
        Case("ρ far from 1 (0.01, 5, 20): the gate saturates, the slope fades towards 0",
             dict(ratio=t([[0.01, 5.0, 20.0], [0.01, 5.0, 20.0]]), advantages=t([[1, 1, 1], [-2, -2, -2]]),
                  temp_pos=1.0, temp_neg=1.05), grad=("ratio",)),
        Case("Â = 0 takes τ_neg: loss 0 and slope 0 wherever ρ is",
             dict(ratio=t([[0.5, 1.0, 2.0]]), advantages=t([[0, 0, 0]]), temp_pos=1.0, temp_neg=2.0),
             grad=("ratio",)),
        Case("a small τ (0.1): the gate is nearly linear, L ≈ −(4/τ)·(½ + τ(ρ − 1)/4)·Â",
             dict(ratio=t([[0.7, 1.2, 1.6]]), advantages=t([[1.5, -0.5, 1]]), temp_pos=0.1, temp_neg=0.1),
             grad=("ratio",)),
    ]
    g = torch.Generator().manual_seed(24)
    for B, T, _ in shapes(g, 5):
        inputs = dict(ratio=torch.exp(randn(g, B, T, scale=0.7)), advantages=randn(g, B, T),
                      temp_pos=pick(g, (0.5, 1.0, 2.0)), temp_neg=pick(g, (1.05, 1.5, 3.0)))
        cases.append(Case(f"random {B}×{T}", inputs, grad=("ratio",)))
    return cases


def decoupled_group_relative() -> list[Case]:
    correct, length = t([1, 1, 0, 0]), t([10, -10, 20, -20])
    cases = [
        Case("one group, two rewards of very different scales (0/1 and ±20): each gets the same say",
             dict(per_function=torch.stack([correct, length], 1), weights=t([1, 1]), group_size=4)),
        Case("two groups of three, weights 1 and 0.5 (applied after normalising)",
             dict(per_function=t([[1, 300], [0, 120], [1, 480], [0, 200], [0, 90], [1, 100]]), weights=t([1, 0.5]),
                  group_size=3)),
        Case("a group in which one reward is the same for every completion: it adds 0 there (0 / (0 + ε), no nan)",
             dict(per_function=t([[1, 5], [1, -5], [1, 2], [1, 0], [0, 3], [1, 1], [0, 4], [1, 0]]),
                  weights=t([1, 1]), group_size=4)),
        Case("F = 1: GRPO's group advantage, whitened over the batch",
             dict(per_function=t([[1], [0], [0], [0], [1], [1], [0], [2]]), weights=t([2]), group_size=4)),
        Case("a negative weight and a weight of 0",
             dict(per_function=t([[1, 3, 7], [0, 1, -2], [1, 0, 5], [0, 2, 1]]), weights=t([1, -0.5, 0]),
                  group_size=2)),
        Case("a reward whose spread is about ε (std 1.2e-4): ε counts, and Bessel's n − 1 in the group's std",
             dict(per_function=t([[1, 0], [0, 2e-4], [0, 0], [1, 2e-4]]), weights=t([1, 1]), group_size=4)),
        Case("every reward equal across the batch: Â = 0 everywhere, not nan",
             dict(per_function=torch.ones(4, 2), weights=t([1, 1]), group_size=2)),
        Case("a larger ε", dict(per_function=torch.stack([correct, length], 1), weights=t([1, 1]), group_size=4,
                                eps=0.5)),
        Case("a group of one compares nothing: a ValueError",
             dict(per_function=t([[1, 2], [0, 3]]), weights=t([1, 1]), group_size=1), raises=ValueError),
        Case("5 completions do not form groups of 2: a ValueError",
             dict(per_function=torch.zeros(5, 2), weights=t([1, 1]), group_size=2), raises=ValueError),
    ]
    g = torch.Generator().manual_seed(25)
    for _ in range(6):
        P, G, F = pick(g, (1, 2, 3)), pick(g, (2, 3, 4)), pick(g, (1, 2, 3))
        scales = torch.tensor([pick(g, (1.0, 10.0, 100.0)) for _ in range(F)])
        rewards = pick(g, (randn(g, P * G, F), (torch.rand(P * G, F, generator=g) < 0.5).float())) * scales
        weights = torch.rand(F, generator=g) + 0.25
        cases.append(Case(f"random: {P} groups of {G}, F = {F} at scales {scales.tolist()}",
                          dict(per_function=rewards, weights=weights, group_size=G)))
    return cases


DESIGN_CASES = {"ex24_soft_gate": soft_gated_surrogate, "ex25_decoupled_advantages": decoupled_group_relative}
