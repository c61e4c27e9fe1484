"""Exercise 2 — the REINFORCE loss (Williams 1992).

Goes with notebook 1, section “The log-derivative trick”.

The log-derivative trick: ∇ E[R] = E[Â_t · ∇ log π_θ(a_t|s_t)]. As a loss to *minimise*, per action:

    L_t = −Â_t · log π_θ(a_t|s_t)

    logp        [B, T]  log π_θ(a_t|s_t), with gradient
    advantages  [B, T]  Â_t, constants (returns-to-go, or G_t − b(s_t))
    result      [B, T]  L_t, per action (exercise 11 averages it)

The gradient must reach ``logp``: ∂L_t/∂ log π = −Â_t, so minimising raises the log-probability
of actions that did better than expected and lowers the others.

    >>> pg_loss(torch.tensor([[-0.5, -2.0]]), torch.tensor([[2.0, -1.0]]))
    tensor([[ 1., -2.]])

Mirrors ``ladder.core.pg_loss``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run reinforce --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def pg_loss(logp: Tensor, advantages: Tensor) -> Tensor:
    """L_t = −Â_t · log π_θ(a_t|s_t)."""
    raise NotImplementedError
