"""Exercise 21 — the fourth policy: the importance weight π_old/π_sampler, truncated or masked (grpo, notebook 5).

Goes with notebook 5, section “The fourth policy: when the sampler is not π_old”.

A cheaper sampler than the trainer — vLLM beside TRL, or ``grpo --sampler-dtype bfloat16``: the same
weights, rounded — draws the tokens from π_sampler, whose log-probs differ a little from π_old's, the
trainer's full-precision forward of the same weights. The batch is then off-policy by the weight
w = π_old/π_sampler, which multiplies each token's (or each completion's) policy term in the loss —
corrected, so that a rare large weight cannot blow up the gradient's variance:

    log w_t = log π_old(a_t) − log π_sampler(a_t)   on real tokens; 0 on padding and where log π_sampler
                                                    is NaN (a token the sampler could not score): w = 1
    token level     w_t = exp(log w_t)                          [B, T]
    sequence level  w_i = exp(Σ_t log w_t) = Π_t w_t            [B, 1]   (a sum over the row: not a mean)
    truncate        w ← clamp(w, C_min, C_max)                  (TIS: biased, but bounded)
    mask            w ← w if C_min ≤ w ≤ C_max, else 0          (the token or the completion leaves the loss)
    mode = "<level>_<how>": token_truncate | token_mask | sequence_truncate | sequence_mask (TRL's
    vllm_importance_sampling_mode); any other mode: raise ValueError. A bound left None is no bound; a
    weight exactly at a bound is inside. The bounds apply after padding and unscored tokens got w = 1, to
    every entry (as TRL's do): with C_min = 1.5 a pad's 1 becomes 1.5 (truncate) or 0 (mask) — the loss
    masks padding anyway. π_old and π_sampler are fixed: no gradient flows through w (detach it).

    old_logp       [B, T]  log π_old(a_t), the trainer's
    sampling_logp  [B, T]  log π_sampler(a_t), recorded as the sampler drew a_t (may hold NaN)
    mask           [B, T]  1 for real tokens (right-padded; padding holds anything, NaN and inf included)
    mode           str     one of the four above
    clip_min       C_min, float or None
    clip_max       C_max, float or None
    result         [B, T] (token modes) or [B, 1] (sequence modes), float32, without a gradient

Select the real, scored entries with ``torch.where`` and ``torch.nan_to_num``: NaN · 0 is NaN. A
sequence's log-weight is the sum of its tokens' — so it grows with the length where each token's
stays small: the product of 300 weights of e^0.01 is e^3 ≈ 20.

Worked example: one row of three real tokens and a pad; the token weights are 4, 0.5 and 1, and the
sequence's is their product, 2:

    >>> old_logp = torch.log(torch.tensor([[0.4, 0.1, 0.3, 1.0]]))
    >>> sampling_logp = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.5]]))
    >>> mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    >>> sampler_weights(old_logp, sampling_logp, mask, "token_truncate", None, 3.0)   # 4 cut to 3; the pad: 1
    tensor([[3.0000, 0.5000, 1.0000, 1.0000]])
    >>> sampler_weights(old_logp, sampling_logp, mask, "token_mask", None, 3.0)       # 4 masked to 0
    tensor([[0.0000, 0.5000, 1.0000, 1.0000]])
    >>> sampler_weights(old_logp, sampling_logp, mask, "sequence_mask", 0.5, 3.0)     # 4 · 0.5 · 1 = 2, kept
    tensor([[2.]])

The core multiplies the policy term by w (``ladder.core.sampler_correction``, called by ``compute_loss``,
exercise 17), never the KL to π_ref: that KL is the trainer's, measured on π_old. Beside w it may drop
whole completions with DeepSeek-V3.2's off-policy mask, ``ladder.core.off_policy_keep`` (``grpo
--off-policy-mask δ``): a completion with Â_i < 0 whose mean log π_sampler − log π_θ over its tokens
exceeds δ leaves the loss — a bad sample drawn by a policy far from the one learning from it.

Mirrors ``ladder.core.sampler_weights``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --sampler-dtype bfloat16 --sampler-correction token_truncate
--use-exercises`` trains with it.
"""

from __future__ import annotations

import math  # noqa: F401 - you may need it

import torch  # noqa: F401 - you will need it
from torch import Tensor


def sampler_weights(old_logp: Tensor, sampling_logp: Tensor, mask: Tensor, mode: str,
                    clip_min: float | None = None, clip_max: float | None = 3.0) -> Tensor:
    """The importance weight π_old/π_sampler of each token [B, T] or sequence [B, 1], truncated or masked."""
    raise NotImplementedError
