"""Solution to exercise 5 — L_t = −min(min(r_t, δ)·Â_t, clip(r_t, 1 − ε_low, 1 + ε_high)·Â_t)."""

from __future__ import annotations

import torch
from torch import Tensor


def clipped_surrogate(ratio: Tensor, advantages: Tensor, clip_eps_low: float,
                      clip_eps_high: float | None = None, delta: float | None = None) -> Tensor:
    """L_t = −min(min(r_t, δ)·Â_t, clip(r_t, 1 − ε_low, 1 + ε_high)·Â_t); δ = None: no cap."""
    if clip_eps_high is None:
        clip_eps_high = clip_eps_low
    clipped = torch.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    if delta is not None:
        ratio = torch.clamp(ratio, max=delta)                     # two-sided: cap the unclipped branch at δ
    return -torch.min(ratio * advantages, clipped * advantages)   # the pessimistic of the two
