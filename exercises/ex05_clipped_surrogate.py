"""Exercise 5 — PPO's clipped surrogate (Schulman et al. 2017), with clip-higher (DAPO) and two-sided clipping.

Goes with notebook 2, section “The clipped objective, on real ratios”.

With the ratio ρ_t = π_θ(a_t|s_t) / π_old(a_t|s_t), per action (a loss to minimise):

    L_t = −min( ρ_t · Â_t,  clip(ρ_t, 1 − ε_low, 1 + ε_high) · Â_t )

Taking the min of the two makes the objective pessimistic: once ρ has moved far enough in the
direction Â rewards (ρ > 1 + ε_high with Â > 0, ρ < 1 − ε_low with Â < 0), the clipped branch wins
and its gradient is 0. Moves in the harmful direction are not clipped: with Â < 0 and ρ large,
nothing bounds the term. Two-sided clipping (INTELLECT-2) caps the unclipped branch at c > 1 + ε_high:

    L_t = −min( min(ρ_t, c) · Â_t,  clip(ρ_t, 1 − ε_low, 1 + ε_high) · Â_t )      (delta = c, TRL's name)

    ratio          [B, T]  ρ_t, with gradient
    advantages     [B, T]  Â_t
    clip_eps_low   float   ε_low: ρ is clipped below at 1 − ε_low
    clip_eps_high  float   ε_high: ρ is clipped above at 1 + ε_high (None: ε_high = ε_low)
    delta          float   c: the unclipped branch uses min(ρ, c) (None: no cap, plain PPO)
    result         [B, T]  L_t

Worked example, ε = 0.2: ρ = 1.5, Â = 1 → −min(1.5, 1.2) = −1.2;  ρ = 0.5, Â = −1 → −min(−0.5, −0.8) = 0.8.

    >>> clipped_surrogate(torch.tensor([[1.5, 0.5]]), torch.tensor([[1.0, -1.0]]), 0.2)
    tensor([[-1.2000,  0.8000]])

With c = 2: ρ = 3, Â = −1 → −min(min(3, 2)·(−1), 1.2·(−1)) = −min(−2, −1.2) = 2 (without c: 3, and
growing with ρ); ρ = 1.5, Â = −1 is under the cap → −min(−1.5, −1.2) = 1.5, as without c.

    >>> clipped_surrogate(torch.tensor([[3.0, 1.5]]), torch.tensor([[-1.0, -1.0]]), 0.2, delta=2.0)
    tensor([[2.0000, 1.5000]])

Mirrors ``ladder.core.clipped_surrogate``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run cartpole --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def clipped_surrogate(ratio: Tensor, advantages: Tensor, clip_eps_low: float,
                      clip_eps_high: float | None = None, delta: float | None = None) -> Tensor:
    """L_t = −min(min(ρ_t, c)·Â_t, clip(ρ_t, 1 − ε_low, 1 + ε_high)·Â_t); c = None: no cap."""
    raise NotImplementedError
