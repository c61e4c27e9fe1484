"""Solution to exercise 25 — GDPO's advantages: normalise each reward within its group, sum, whiten the batch."""

from __future__ import annotations

from torch import Tensor


def decoupled_group_relative(per_function: Tensor, weights: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    """Â [N]: each reward function normalised within its group, weighted, summed, whitened over the batch."""
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2, got {group_size}")
    N, F = per_function.shape
    if N % group_size:
        raise ValueError(f"{N} rewards do not form groups of {group_size}")
    grouped = per_function.view(-1, group_size, F)                          # [groups, G, F]
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    normalised = centred / (grouped.std(dim=1, keepdim=True) + eps)        # each f alone; zero spread: 0
    summed = (normalised.reshape(N, F) * weights.to(per_function.dtype)).sum(dim=1)   # s_i = Σ_f w_f·ř_{i,f}
    return (summed - summed.mean()) / (summed.std() + eps)                 # whitened over the batch
