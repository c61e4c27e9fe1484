"""Solution to exercise 9 — r_t = −β · KL_t + [t = last real token] · score."""

from __future__ import annotations

from torch import Tensor

from ladder.core import kl_estimate, last_step_mask


def kl_penalized_rewards(scores: Tensor, old_logp: Tensor, ref_logp: Tensor, mask: Tensor,
                         kl_coef: float, estimator: str = "k1") -> tuple[Tensor, Tensor]:
    """(r_t = −β·KL_t + [t = last]·score, KL_t), both 0 on padding."""
    kl = kl_estimate(old_logp, ref_logp, estimator) * mask              # KL_t on real tokens only
    last = last_step_mask(mask)                                     # one-hot of each row's last token
    rewards = -kl_coef * kl + last * scores[:, None]
    return rewards, kl
