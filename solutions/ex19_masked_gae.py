"""Solution to exercise 19 — GAE along each completion's real tokens, ending at its last one."""

from __future__ import annotations

import torch
from ex03_gae import gae  # your exercise 3, from the same directory
from torch import Tensor

from ladder.core import last_step_mask


def masked_gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """(Â, R) of GAE along each row's real tokens, no bootstrap past the last one; both 0 on padding."""
    real = mask.bool()
    rewards, values = torch.where(real, rewards, 0.0), torch.where(real, values, 0.0)   # padding: r = V = 0
    dones = last_step_mask(mask.to(rewards.dtype))            # the episode ends at the last real token
    advantages, returns = gae(rewards, values, dones, gamma, lam)
    return torch.where(real, advantages, 0.0), torch.where(real, returns, 0.0)     # select: NaN never leaks
