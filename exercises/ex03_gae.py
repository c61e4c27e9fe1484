"""Exercise 3 — generalised advantage estimation (Schulman et al. 2016; PPO, rungs 2 and 3).

Goes with notebook 2, section “GAE”.

With a critic V, the TD error δ_t says how much better step t went than V expected; GAE sums
the TD errors ahead, discounted by γλ, and never across the end of an episode:

    δ_t = r_t + γ · V(s_{t+1}) · (1 − d_t) − V(s_t)
    Â_t = δ_t + γλ · (1 − d_t) · Â_{t+1}            (Â = 0 after the last column)
    R_t = Â_t + V(s_t)                               (the critic's target)

    rewards      [B, T]  r_t
    values       [B, T]  V(s_t); V(s_{t+1}) is the next column
    dones        [B, T]  d_t = 1 when the episode ended after step t (then nothing is bootstrapped)
    gamma, lam   floats  γ and λ (λ = 0: one-step TD; λ = 1: Monte-Carlo return minus V)
    last_values  [B]     V(s_T), the value after the last column, for rows the rollout cut off;
                         None means 0 (every row ends inside the tensor)
    result       (advantages [B, T], returns [B, T])

Worked example: r = (1, 1), V = (0.5, 0.5), no dones, γ = 0.9, λ = 0.5, V(s_T) = 1:
δ_1 = 1 + 0.9·1 − 0.5 = 1.4, δ_0 = 1 + 0.9·0.5 − 0.5 = 0.95, Â_1 = 1.4, Â_0 = 0.95 + 0.45·1.4 = 1.58.

    >>> adv, ret = gae(torch.tensor([[1., 1.]]), torch.tensor([[.5, .5]]), torch.zeros(1, 2),
    ...                gamma=0.9, lam=0.5, last_values=torch.tensor([1.]))
    >>> adv, ret
    (tensor([[1.5800, 1.4000]]), tensor([[2.0800, 1.9000]]))

Hint: compute every δ_t at once (V(s_{t+1}) is ``values`` shifted left by one column, with
``last_values`` appended), then loop backwards over t for Â.
Mirrors ``ladder.core.gae``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run cartpole --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def gae(rewards: Tensor, values: Tensor, dones: Tensor, gamma: float, lam: float,
        last_values: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(Â, R) by GAE(γ, λ), without bootstrapping across d_t = 1."""
    raise NotImplementedError
