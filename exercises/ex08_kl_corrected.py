"""Exercise 8 — the importance-sampling-corrected KL estimate.

Goes with notebook 3, section “Why $\\pi_{\\text{old}} = \\pi_\\theta$ at sampling, and what $\\mu$ does”.

k1, k2 and k3 (exercise 7) are estimates for actions sampled from π_θ. But after the first
optimiser step on a batch, the batch was sampled by π_old ≠ π_θ, and the plain average then
estimates E_{a ~ π_old}[k(a)], an expectation under the wrong policy. Weighting each estimate by how
much more likely π_θ makes the action turns the average under π_old into one under π_θ, for any k:

    E_{a ~ π_old}[ (π_θ(a) / π_old(a)) · k(a) ]  =  Σ_a π_θ(a) · k(a)  =  E_{a ~ π_θ}[ k(a) ]
    per action:  w · k   with   w = exp(log π_θ − log π_old)

That is KL(π_θ ‖ π_ref) for k1 and k3, the two unbiased estimators, and not for k2
(ℓ = log π_ref − log π_θ as in exercise 7):

    E_{π_θ}[k1] = Σ_a π_θ · log(π_θ / π_ref)    = KL(π_θ ‖ π_ref)
    E_{π_θ}[k3] = Σ_a π_ref − 1 + E_{π_θ}[k1]    = KL(π_θ ‖ π_ref)     since Σ_a π_ref = 1
    E_{π_θ}[k2] = E_{π_θ}[ℓ² / 2]                ≠ KL(π_θ ‖ π_ref)     close to it only while π_θ ≈ π_ref

The weight keeps its gradient (do not detach it). π_old does not depend on θ, so the gradient of
the batch average of w·k is an unbiased estimate of ∇_θ E_{π_θ}[k]: of ∇_θ KL(π_θ ‖ π_ref) for k1
and k3; for k2, of the gradient of E_{π_θ}[ℓ² / 2], which is not the KL's.

With π_θ = π_old, w = 1 and the value equals the plain one, but the gradient does not:
∇w = w · ∇log π_θ ≠ 0. Take k1. Unweighted, ∇k1 = ∇log π_θ, and E_{π_θ}[∇log π_θ] = 0: k1 in the
loss has zero *expected* gradient, whatever π_ref is (one batch's gradient is not zero, but it is
noise, with no pull towards π_ref). Weighted, ∇(w · k1) = w · (1 + k1) · ∇log π_θ, whose expectation
under π_old is E_{π_θ}[k1 · ∇log π_θ] = ∇_θ KL(π_θ ‖ π_ref).

    logp       [B, T]  log π_θ(a_t), with gradient
    ref_logp   [B, T]  log π_ref(a_t)
    estimator  str     "k1", "k2" or "k3" (exercise 7); anything else: raise ValueError
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
