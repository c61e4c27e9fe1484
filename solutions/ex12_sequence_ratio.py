"""Solution to exercise 12 — log s_i = (1/|y_i|) Σ_t m_t · (log π_θ(a_t) − log π_old(a_t))."""

from __future__ import annotations

import torch
from torch import Tensor


def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """log s_i = the mean of log π_θ − log π_old over row i's real tokens, [B, 1]; 0 for an empty row."""
    real = mask.bool()
    total = torch.where(real, logp - old_logp, 0.0).sum(dim=1, keepdim=True)    # select: inf/nan padding never leaks
    return total / real.sum(dim=1, keepdim=True).clamp(min=1).to(total.dtype)   # / |y_i|; an empty row: 0 / 1
