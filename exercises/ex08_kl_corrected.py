"""Exercise 8 — the importance-sampling-corrected KL estimate.

k1, k2 and k3 (exercise 7) estimate KL(π_θ ‖ π_ref) for actions sampled from π_θ. But after the
first optimiser step on a batch, the batch was sampled by π_old ≠ π_θ, and the plain average is
biased. Weighting each estimate by how much more likely π_θ makes the action fixes it:

    KL(π_θ ‖ π_ref) = E_{a ~ π_old}[ (π_θ(a) / π_old(a)) · k(a) ]
    per action:  w · k   with   w = exp(log π_θ − log π_old)

The weight keeps its gradient (do not detach it): then the gradient of w·k is also an unbiased
estimate of the gradient of the KL. With π_θ = π_old, w = 1 and the value equals the plain one.

    logp       [B, T]  log π_θ(a_t), with gradient
    ref_logp   [B, T]  log π_ref(a_t)
    estimator  str     "k1", "k2" or "k3" (exercise 7)
    old_logp   [B, T]  log π_old(a_t) of the policy that sampled the batch; None: the plain estimate
    result     [B, T]  the per-action estimate

Worked example: log π_θ = −1, log π_ref = −2, log π_old = −1.5, k1: w = e^0.5 ≈ 1.6487, k1 = 1.

    >>> kl_estimate(torch.tensor([[-1.0]]), torch.tensor([[-2.0]]), "k1", old_logp=torch.tensor([[-1.5]]))
    tensor([[1.6487]])

Start from your exercise 7 (copy it here) and add the weight.
Mirrors ``ladder.core.kl_estimate``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --qlora --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def kl_estimate(logp: Tensor, ref_logp: Tensor, estimator: str = "k3",
                old_logp: Tensor | None = None) -> Tensor:
    """k1/k2/k3, importance-weighted by π_θ/π_old when ``old_logp`` is given."""
    raise NotImplementedError
