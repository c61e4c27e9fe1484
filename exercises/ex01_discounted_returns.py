"""Exercise 1 — discounted returns-to-go (REINFORCE, rung 1).

Goes with notebook 1, section “Returns-to-go”.

Each row of ``rewards`` is one whole episode, right-padded to the longest one. The return-to-go of
step t is everything the episode still collects from t on, discounted by γ per step:

    G_t = r_t + γ · G_{t+1},      G = 0 after the last real step

    rewards  [B, T]  r_t; padding may hold junk, so ignore it
    mask     [B, T]  1 for real steps, 0 for padding (each row: ones, then zeros)
    gamma    float   γ in [0, 1]
    result   [B, T]  G_t, and 0 on padding

Worked example: rewards 1, 1, 1 with γ = 0.5 give G = (1 + 0.5·1.5, 1 + 0.5·1, 1) = (1.75, 1.5, 1).

    >>> discounted_returns(torch.tensor([[1., 1., 1.]]), torch.ones(1, 3), gamma=0.5)
    tensor([[1.7500, 1.5000, 1.0000]])
    >>> discounted_returns(torch.tensor([[1., 2., 9.]]), torch.tensor([[1., 1., 0.]]), gamma=0.5)
    tensor([[2., 2., 0.]])

Hint: walk backwards over t carrying a running G (a Python loop over T is fine).
Mirrors ``ladder.core.discounted_returns``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run reinforce --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """G_t = r_t + γ · G_{t+1} over each row's real steps; 0 on padding."""
    raise NotImplementedError
