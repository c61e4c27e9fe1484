"""Solution to exercise 5 — L_t = −min(r_t·Â_t, clip(r_t, 1 − ε_low, 1 + ε_high)·Â_t)."""

from __future__ import annotations

import torch
from torch import Tensor


def clipped_surrogate(ratio: Tensor, advantages: Tensor, clip_eps_low: float,
                      clip_eps_high: float | None = None) -> Tensor:
    """L_t = −min(r_t·Â_t, clip(r_t, 1 − ε_low, 1 + ε_high)·Â_t)."""
    if clip_eps_high is None:
        clip_eps_high = clip_eps_low
    clipped = torch.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    return -torch.min(ratio * advantages, clipped * advantages)   # the pessimistic of the two
