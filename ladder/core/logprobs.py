"""Token log-probabilities from a language model's logits: the one-position shift, τ, the mask.

A causal LM's output at position i is a distribution over the token at position i + 1. For a
completion (the last n tokens of a sequence), each token's log-probability under the policy is

    log π(x_{i+1} | x_≤i) = log_softmax(z_i / τ)[x_{i+1}]

with z_i the logits at position i and τ the sampling temperature (``generate`` divides by τ before
it samples, so the policy that sampled is the softmax of z / τ). Padding gets 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .swappable import swappable


@swappable
def token_logp(logits: Tensor, input_ids: Tensor, mask: Tensor, temperature: float = 1.0) -> Tensor:
    """log π of each scored token, ``[B, n]``, from the logits of the positions before it.

        logits     [B, n + 1, V]  z_i at n + 1 consecutive positions (the last one predicts nothing scored)
        input_ids  [B, n + 1]     the tokens at the same positions: x_i
        mask       [B, n]         1 where x_{i+1} is a token to score, 0 on padding

        result[b, i] = log_softmax(z_{b,i} / τ)[x_{b,i+1}] · mask[b, i]     (0 on padding, never NaN)
                     = z_{b,i,x}/τ − log Σ_v exp(z_{b,i,v}/τ)                (how it is computed: no
                                                                               second [B, n, V] tensor)
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if logits.shape[:2] != input_ids.shape or mask.shape != (input_ids.shape[0], input_ids.shape[1] - 1):
        raise ValueError(f"logits {list(logits.shape)}, input_ids {list(input_ids.shape)} and mask "
                         f"{list(mask.shape)} must be [B, n + 1, V], [B, n + 1] and [B, n]")
    scaled = logits[:, :-1].float() / temperature            # z_i predicts x_{i+1}
    logp = scaled.gather(-1, input_ids[:, 1:, None]).squeeze(-1) - torch.logsumexp(scaled, dim=-1)
    return torch.where(mask.bool(), logp, 0.0)
