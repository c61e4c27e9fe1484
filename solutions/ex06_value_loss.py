"""Solution to exercise 6 — ½ (V − R)², clipped around V_old: ½ max((V − R)², (V_clipped − R)²)."""

from __future__ import annotations

import torch
from torch import Tensor


def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, clip: float | None = None) -> Tensor:
    """½ (V − R)², or with a clip the larger of the unclipped and clipped errors."""
    unclipped = (values - returns) ** 2
    if clip is None:
        return 0.5 * unclipped
    clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)   # V within c of V_old
    return 0.5 * torch.max(unclipped, (clipped_values - returns) ** 2)           # the worse error
