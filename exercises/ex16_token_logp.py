"""Exercise 16 — token log-probabilities from a language model's logits.

Goes with notebook 4, section “Token log-probs: the one-position shift”.

Everything on the LM rungs starts here: log π_θ(a_t) of each completion token is what the ratio,
the KL and the loss are made of. A causal LM's output at position i is a distribution over the token
at position i + 1 — the one-position shift — and the policy that sampled is the softmax of the
logits divided by the temperature τ (``generate`` divides before it samples), so

    logp[b, i] = log_softmax(z[b, i] / τ)[x[b, i + 1]] · mask[b, i]

    logits       [B, n + 1, V]  z: the logits at n + 1 consecutive positions (the last prompt position and the
                                completion's); the last position's logits predict nothing that is scored
    input_ids    [B, n + 1]     x: the tokens at the same positions
    mask         [B, n]         1 where x[b, i + 1] is a real completion token, 0 on padding
    temperature  float          τ > 0 (otherwise raise ValueError)
    result       [B, n]         0 on padding (for a completion of T tokens, n = T: the [B, T] log-probs)

Compute it stably: log_softmax(z) = z − logsumexp(z) (``torch.log_softmax`` or ``torch.logsumexp``),
never log(softmax(z)); and in float32 (``logits.float()``): a bf16 model's logits have 8 bits of
mantissa, too few for log-probs that ratios exp(logp − old_logp) are made of.

Worked example: V = 3, positions 0 and 1 scored; z_0 = (0, 1, 2) predicts x_1 = 2:
log(e²/(1 + e + e²)) = −0.4076; z_1 = (2, 0, 0) predicts x_2 = 0: log(e²/(e² + 2)) = −0.2395.

    >>> logits = torch.tensor([[[0.0, 1.0, 2.0], [2.0, 0.0, 0.0], [5.0, 5.0, 5.0]]])
    >>> token_logp(logits, torch.tensor([[1, 2, 0]]), torch.tensor([[1.0, 1.0]]))
    tensor([[-0.4076, -0.2395]])

``CausalLMPolicy.evaluate`` calls this (in chunks of positions, so the [B, T, V] logits never sit in
memory at once): with it, every log-prob a GRPO or RLHF run uses is yours.
Mirrors ``ladder.core.token_logp``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def token_logp(logits: Tensor, input_ids: Tensor, mask: Tensor, temperature: float = 1.0) -> Tensor:
    """logp[b, i] = log_softmax(z[b, i] / τ)[x[b, i + 1]], 0 on padding; [B, n]."""
    raise NotImplementedError
