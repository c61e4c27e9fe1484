"""Exercise 19 — GAE over the tokens of a completion (RLHF-PPO, rung 3; notebook 4).

Goes with notebook 4, section “From per-token rewards to advantages: GAE over the completion”.

ppo-sentiment gives every completion token a reward (exercise 9: −β·KL_t, plus the score on the last
real token) and a value V_t from its value head, then runs GAE (exercise 3) along the tokens. Each
row is one episode that ends at its last real token: nothing is bootstrapped past it (V after EOS is
0), and the padding after it must not reach a real token.

    d_t  = 1 at each row's last real token, else 0
    δ_t  = r_t + γ · V_{t+1} · (1 − d_t) − V_t
    Â_t  = δ_t + γλ · (1 − d_t) · Â_{t+1}
    R_t  = Â_t + V_t                                    (the value target)
    both 0 on padding

    rewards  [B, T]  r_t (right-padded; padding may hold anything, NaN included: select with torch.where)
    values   [B, T]  V_t
    mask     [B, T]  1 for real tokens (a row may be empty)
    gamma    float   γ
    lam      float   λ
    result   (advantages [B, T], returns [B, T])

With γ = λ = 1 the first token's advantage is the whole row's reward minus its value:
Â_0 = Σ_t r_t − V_0. Worked example, one row of 2 real tokens and one pad, γ = λ = 1:
r = (0, 1), V = (0.5, 0.2): Â_1 = 1 − 0.2 = 0.8, Â_0 = 0 + 0.2 − 0.5 + 0.8 = 0.5 = 1 − 0.5.

    >>> advantages, returns = masked_gae(torch.tensor([[0.0, 1.0, 9.0]]), torch.tensor([[0.5, 0.2, 9.0]]),
    ...                                  torch.tensor([[1.0, 1.0, 0.0]]), 1.0, 1.0)
    >>> advantages, returns
    (tensor([[0.5000, 0.8000, 0.0000]]), tensor([[1., 1., 0.]]))

You may use your ``gae`` (exercise 3; ``from ex03_gae import gae``) and ``ladder.core.last_step_mask``.
Mirrors ``ladder.core.masked_gae``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run ppo-sentiment --preset tiny --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def masked_gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """(Â, R) of GAE along each row's real tokens, no bootstrap past the last one; both 0 on padding."""
    raise NotImplementedError
