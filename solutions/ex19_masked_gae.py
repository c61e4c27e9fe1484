"""Solution to exercise 19 — GAE along each completion's real tokens, ending at its last one."""

from __future__ import annotations

from ex03_gae import gae  # your exercise 3, from the same directory
from torch import Tensor

from ladder.core import last_step_mask


def masked_gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """(Â, R) of GAE along each row's real tokens, no bootstrap past the last one; both 0 on padding."""
    mask = mask.to(rewards.dtype)
    dones = last_step_mask(mask)                              # the episode ends at the last real token
    advantages, returns = gae(rewards * mask, values * mask, dones, gamma, lam)   # padding: r = V = 0
    return advantages * mask, returns * mask
