"""Exercise 7 — estimating KL(π_θ ‖ π_ref) from sampled actions: k1, k2, k3 (Schulman, "Approximating KL").

Goes with notebook 3, section “Estimating a KL from samples”.

The full KL sums over every action; we only have the actions that were sampled from π_θ and their
log-probs. With the log-ratio ℓ = log π_ref(a) − log π_θ(a), three per-action estimates:

    k1 = −ℓ                   unbiased, high variance, can be negative
    k2 = ℓ² / 2               biased, low variance, ≥ 0
    k3 = (e^ℓ − 1) − ℓ        unbiased, low variance, ≥ 0        (GRPO's choice)

    logp       [B, T]  log π_θ(a_t), with gradient
    ref_logp   [B, T]  log π_ref(a_t) of the frozen reference
    estimator  str     "k1", "k2" or "k3"; anything else: raise ValueError
    old_logp   [B, T]  leave it for exercise 8 (here it is always None)
    result     [B, T]  the per-action estimate

Worked example: log π_θ = −1, log π_ref = −2, so ℓ = −1: k1 = 1, k2 = 0.5, k3 = e^−1 − 1 + 1 ≈ 0.3679.

    >>> [kl_estimate(torch.tensor([[-1.0]]), torch.tensor([[-2.0]]), k).item() for k in ("k1", "k2")]
    [1.0, 0.5]
    >>> kl_estimate(torch.tensor([[-1.0]]), torch.tensor([[-2.0]]))
    tensor([[0.3679]])

Hint: ``torch.expm1(ℓ)`` is e^ℓ − 1 without losing digits when ℓ is small.
Mirrors ``ladder.core.kl_estimate`` without ``old_logp``; exercise 8 completes it, and
``--use-exercises`` swaps in exercise 8's version. Grade it: ``pytest exercises/``.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def kl_estimate(logp: Tensor, ref_logp: Tensor, estimator: str = "k3",
                old_logp: Tensor | None = None) -> Tensor:
    """The per-action k1, k2 or k3 estimate of KL(π_θ ‖ π_ref)."""
    raise NotImplementedError
