"""Solution to exercise 16 — logp[b, i] = log_softmax(z[b, i] / τ)[x[b, i + 1]] · mask[b, i]."""

from __future__ import annotations

import torch
from torch import Tensor


def token_logp(logits: Tensor, input_ids: Tensor, mask: Tensor, temperature: float = 1.0) -> Tensor:
    """logp[b, i] = log_softmax(z[b, i] / τ)[x[b, i + 1]], 0 on padding; [B, n]."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    scaled = logits[:, :-1].float() / temperature          # position i predicts token i + 1: drop the last
    targets = input_ids[:, 1:, None]                       # … and the first token, which nothing predicts
    logp = scaled.gather(-1, targets).squeeze(-1) - torch.logsumexp(scaled, dim=-1)   # z_x − log Σ_v e^{z_v}
    return torch.where(mask.bool(), logp, 0.0)             # select, not multiply: padding never leaks
