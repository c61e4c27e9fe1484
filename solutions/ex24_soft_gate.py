"""Solution to exercise 24 — SAPO's soft gate −(4/τ)·σ(τ(r − 1))·Â, τ chosen by the sign of Â."""

from __future__ import annotations

import torch
from torch import Tensor


def soft_gated_surrogate(ratio: Tensor, advantages: Tensor, temp_pos: float, temp_neg: float) -> Tensor:
    """SAPO's per-token policy loss −(4/τ)·σ(τ(r − 1))·Â, τ = τ_pos where Â > 0, else τ_neg."""
    temperature = torch.where(advantages > 0, temp_pos, temp_neg)     # Â = 0 takes τ_neg (its loss is 0)
    gate = torch.sigmoid(temperature * (ratio - 1.0))                  # ½ at r = 1
    return -gate * 4.0 / temperature * advantages                      # slope −4σ(1 − σ)·Â: −Â at r = 1
