"""Solution to exercise 14 — r̃_i = r_i − β · Σ_t m_t · k(log π_old(a_t), log π_ref(a_t))."""

from __future__ import annotations

import torch
from torch import Tensor

from ladder.core import kl_estimate


def kl_in_reward(rewards: Tensor, old_logp: Tensor, ref_logp: Tensor, mask: Tensor, kl_coef: float,
                 estimator: str = "k1") -> tuple[Tensor, Tensor]:
    """(r̃_i = r_i − β·KL_i, KL_i = Σ_t m_t · k(log π_old, log π_ref)), the KL a constant."""
    per_token = kl_estimate(old_logp, ref_logp, estimator)                      # on π_old, per token
    kl = torch.where(mask.bool(), per_token, 0.0).sum(dim=1).detach()           # Σ over real tokens; a constant
    return rewards - kl_coef * kl, kl
