"""Exercise 24 — SAPO's soft gate: a sigmoid of the ratio in place of PPO's hard clip (grpo --loss-type sapo).

Goes with notebook 6b, section “1 · Objectives as functions of the ratio”.

PPO's clip (exercise 5) keeps a token's gradient whole inside [1 − ε_low, 1 + ε_high] and switches it off
at the edge. SAPO (arXiv 2511.20347) turns it down gradually instead: the policy term is a sigmoid of the
ratio, scaled so that at ρ = 1 its slope is that of the unclipped surrogate −ρ·Â:

    τ_t        = τ_pos if Â_t > 0 else τ_neg              (Â_t = 0: τ_neg; its loss is 0 either way)
    L_t        = −(4/τ_t) · σ(τ_t · (ρ_t − 1)) · Â_t      σ(x) = 1 / (1 + e^(−x)), torch.sigmoid
    ∂L_t/∂ρ_t  = −4 · σ · (1 − σ) · Â_t                   −Â_t at ρ = 1 (σ = ½), fading as ρ leaves 1

The gate is on ρ − 1, not on ρ nor on log ρ: at ρ = 1 it sits in the middle of the sigmoid, where 4σ(1 − σ)
= 1. A larger τ makes the gradient fade faster away from ρ = 1; TRL's defaults τ_pos = 1 and τ_neg = 1.05
damp the tokens with Â < 0 a little sooner, as their unbounded ratios are the less stable side.

    ratio       [B, T]  ρ = π_θ / π_old, with its graph (padding holds ρ = 1: the loss's aggregation masks it)
    advantages  [B, T]  Â, a constant
    temp_pos    τ_pos, float > 0
    temp_neg    τ_neg, float > 0
    result      [B, T]  L_t, differentiable in ratio

Worked example: at ρ = 1 the loss is −(4/τ)·½·Â and its slope −Â; away from 1 the slope fades (τ_pos = 1,
τ_neg = 2; the third token has Â < 0, so its τ is 2):

    >>> ratio = torch.tensor([[1.0, 1.5, 0.5, 3.0]], requires_grad=True)
    >>> advantages = torch.tensor([[1.0, 1.0, -1.0, 1.0]])
    >>> loss = soft_gated_surrogate(ratio, advantages, 1.0, 2.0)
    >>> loss.detach()          # −4·½, −4·σ(0.5), (4/2)·σ(−1), −4·σ(2)
    tensor([[-2.0000, -2.4898,  0.5379, -3.5232]])
    >>> loss.sum().backward()
    >>> ratio.grad             # −4σ(1 − σ)·Â: −1 at ρ = 1, smaller in size away from it
    tensor([[-1.0000, -0.9400,  0.7864, -0.4200]])

``compute_loss`` (exercise 17) reaches it through the objective spec ``ladder.core.SoftGate(temp_pos, temp_neg)``
(``grpo --loss-type sapo --sapo-temperature-pos/-neg``).

Mirrors ``ladder.core.soft_gated_surrogate``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --loss-type sapo --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def soft_gated_surrogate(ratio: Tensor, advantages: Tensor, temp_pos: float, temp_neg: float) -> Tensor:
    """SAPO's per-token policy loss −(4/τ)·σ(τ(ρ − 1))·Â, τ = τ_pos where Â > 0, else τ_neg."""
    raise NotImplementedError
