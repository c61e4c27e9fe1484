"""Solution to exercise 11 — masked aggregation: token_mean, seq_mean_token_mean (GRPO), seq_mean_token_sum
(LUSPO), sum_over_constant."""

from __future__ import annotations

import torch
from torch import Tensor


def aggregate(per_action: Tensor, mask: Tensor, mode: str = "token_mean",
              num_tokens: float | None = None) -> Tensor:
    """The masked average of a per-action loss, in one of four modes."""
    per_action = torch.where(mask.bool(), per_action, 0.0)          # select: inf or nan padding never leaks
    mask = mask.to(per_action.dtype)
    total = per_action.sum()                                        # Σ m·x
    if mode == "token_mean":
        return total / mask.sum().clamp(min=1.0)                    # / Σ m
    if mode == "seq_mean_token_mean":
        per_seq = per_action.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return per_seq.mean()                                       # every sequence counts once
    if mode == "seq_mean_token_sum":
        return per_action.sum(dim=1).mean()                         # each sequence's sum: length counts
    if mode == "sum_over_constant":
        if num_tokens is None:
            raise ValueError("sum_over_constant needs num_tokens")
        return total / max(num_tokens, 1.0)                         # / B · L_max (Dr. GRPO), / real tokens (DAPO)
    raise ValueError(f"mode must be token_mean, seq_mean_token_mean, seq_mean_token_sum or sum_over_constant, "
                     f"got {mode!r}")
