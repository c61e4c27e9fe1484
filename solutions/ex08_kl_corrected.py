"""Solution to exercise 8 — E_{π_old}[(π_θ/π_old) · k] = E_{π_θ}[k]: KL(π_θ ‖ π_ref) for k1 and k3, not k2."""

from __future__ import annotations

import torch
from torch import Tensor


def kl_estimate(logp: Tensor, ref_logp: Tensor, estimator: str = "k3",
                old_logp: Tensor | None = None) -> Tensor:
    """k1/k2/k3, importance-weighted by π_θ/π_old when ``old_logp`` is given."""
    log_ratio = ref_logp - logp                        # ℓ = log π_ref − log π_θ
    if estimator == "k1":
        kl = -log_ratio
    elif estimator == "k2":
        kl = 0.5 * log_ratio**2
    elif estimator == "k3":
        kl = torch.expm1(log_ratio) - log_ratio
    else:
        raise ValueError(f"estimator must be k1, k2 or k3, got {estimator!r}")
    if old_logp is not None:
        kl = torch.exp(logp - old_logp) * kl           # w = π_θ/π_old, gradient kept
    return kl
