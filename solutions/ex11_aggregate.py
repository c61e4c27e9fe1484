"""Solution to exercise 11 — masked aggregation: token_mean, seq_mean_token_mean (GRPO), dr_grpo, dapo."""

from __future__ import annotations

import torch
from torch import Tensor


def aggregate(per_action: Tensor, mask: Tensor, mode: str = "token_mean",
              num_tokens: float | None = None) -> Tensor:
    """The masked average of a per-action loss, in one of four modes."""
    per_action = torch.where(mask.bool(), per_action, 0.0)          # select: inf or nan padding never leaks
    mask = mask.to(per_action.dtype)
    total = per_action.sum()                                        # Σ m·x
    if mode == "token_mean" or (mode == "dapo" and num_tokens is None):
        return total / mask.sum().clamp(min=1.0)                    # / Σ m
    if mode == "seq_mean_token_mean":
        per_seq = per_action.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return per_seq.mean()                                       # every sequence counts once
    if mode == "dr_grpo":
        return total / (mask.numel() if num_tokens is None else max(num_tokens, 1.0))  # / B · L_max (None: B · T)
    if mode == "dapo":
        return total / max(num_tokens, 1.0)                         # / the batch's real tokens
    raise ValueError(f"mode must be token_mean, seq_mean_token_mean, dr_grpo or dapo, got {mode!r}")
