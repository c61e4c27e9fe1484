"""Solution to exercise 4 — whitening over the real entries: x̂ = (x − mean) / sqrt(var + ε)."""

from __future__ import annotations

import torch
from torch import Tensor


def whiten(x: Tensor, mask: Tensor | None = None, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """(x − mean) / sqrt(var + ε) over the real entries; 0 on padding."""
    if mask is None:
        mask = torch.ones_like(x)
    real = mask.bool()
    x = torch.where(real, x, 0.0)                                # padding (even nan) → 0
    n = real.sum()
    mean = x.sum() / n.clamp(min=1)
    var = torch.where(real, x - mean, 0.0).pow(2).sum() / (n - 1).clamp(min=1)   # sample variance
    out = (x - mean) * torch.rsqrt(var + eps)                    # ε: equal entries give 0, not nan
    if not shift_mean:
        out = out + mean
    return torch.where(real, out, 0.0)
