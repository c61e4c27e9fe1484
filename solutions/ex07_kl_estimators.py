"""Solution to exercise 7 — k1 = −ℓ, k2 = ℓ²/2, k3 = (e^ℓ − 1) − ℓ with ℓ = log π_ref − log π_θ."""

from __future__ import annotations

import torch
from torch import Tensor


def kl_estimate(logp: Tensor, ref_logp: Tensor, estimator: str = "k3",
                old_logp: Tensor | None = None) -> Tensor:
    """The per-action k1, k2 or k3 estimate of KL(π_θ ‖ π_ref) (``old_logp``: exercise 8)."""
    log_ratio = ref_logp - logp                        # ℓ
    if estimator == "k1":
        return -log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio**2
    if estimator == "k3":
        return torch.expm1(log_ratio) - log_ratio
    raise ValueError(f"estimator must be k1, k2 or k3, got {estimator!r}")
