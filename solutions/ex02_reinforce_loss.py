"""Solution to exercise 2 — the REINFORCE loss: L_t = −Â_t · log π_θ(a_t|s_t)."""

from __future__ import annotations

from torch import Tensor


def pg_loss(logp: Tensor, advantages: Tensor) -> Tensor:
    """L_t = −Â_t · log π_θ(a_t|s_t); the gradient flows through logp only."""
    return -advantages * logp
