"""Solution to exercise 3 — generalised advantage estimation.

    δ_t = r_t + γ · V(s_{t+1}) · (1 − d_t) − V(s_t)
    Â_t = δ_t + γλ · (1 − d_t) · Â_{t+1},      R_t = Â_t + V(s_t)
"""

from __future__ import annotations

import torch
from torch import Tensor


def gae(rewards: Tensor, values: Tensor, dones: Tensor, gamma: float, lam: float,
        last_values: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(Â, R) by GAE(γ, λ), without bootstrapping across d_t = 1."""
    if last_values is None:
        last_values = torch.zeros_like(values[:, 0])                       # rows end inside the tensor
    not_done = 1.0 - dones.to(rewards.dtype)                                # 1 − d_t
    next_values = torch.cat([values[:, 1:], last_values[:, None]], dim=1)   # V(s_{t+1})
    deltas = rewards + gamma * next_values * not_done - values              # δ_t, all at once
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])                               # Â after the last column: 0
    for t in reversed(range(rewards.shape[1])):
        running = deltas[:, t] + gamma * lam * not_done[:, t] * running     # Â_t = δ_t + γλ(1 − d_t)Â_{t+1}
        advantages[:, t] = running
    return advantages, advantages + values                                  # R_t = Â_t + V(s_t)
