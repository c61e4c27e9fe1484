"""Solution to exercise 21 — w = π_old/π_sampler per token or per sequence, truncated or masked at [C_min, C_max]."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def sampler_weights(old_logp: Tensor, sampling_logp: Tensor, mask: Tensor, mode: str,
                    clip_min: float | None = None, clip_max: float | None = 3.0) -> Tensor:
    """The importance weight π_old/π_sampler of each token [B, T] or sequence [B, 1], truncated or masked."""
    if mode not in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"):
        raise ValueError(f"unknown mode {mode!r}")
    level, how = mode.split("_")                                        # "token_truncate" → "token", "truncate"
    log_w = torch.where(mask.bool(), old_logp - sampling_logp, 0.0)     # select: padding's junk never leaks, w = 1
    log_w = torch.nan_to_num(log_w, nan=0.0)                            # the sampler could not score it: w = 1
    if level == "sequence":
        log_w = log_w.sum(dim=1, keepdim=True)                          # Π_t w_t: the sum of the logs, not their mean
    w = torch.exp(log_w.detach().float())                               # a constant: π_old and π_sampler are fixed
    low = -math.inf if clip_min is None else clip_min                   # a bound left None is no bound
    high = math.inf if clip_max is None else clip_max
    if how == "truncate":
        return torch.clamp(w, low, high)
    return torch.where((w < low) | (w > high), 0.0, w)                  # outside [C_min, C_max]: out of the loss
