"""Exercise 9 — per-token KL-shaped rewards (RLHF-PPO, Ziegler et al. 2019; rung 3).

Goes with notebook 4, section “Reward vs KL: what $\\beta$ buys”.

A reward model scores a whole completion once. RLHF-PPO turns that into a per-token reward: every
token pays −β times its KL estimate to the reference model, and the last real token also gets the
score. GAE (exercise 3) then spreads it over the completion.

    r_t = −β · KL_t + [t = last real token] · score

    scores     [B]     one score per completion
    old_logp   [B, T]  log π_old(a_t): the policy that sampled the completions
    ref_logp   [B, T]  log π_ref(a_t)
    mask       [B, T]  1 for real tokens (right-padded; a row may be empty)
    kl_coef    float   β
    estimator  str     "k1", "k2" or "k3" for KL_t (exercise 7); anything else: raise ValueError
    result     (rewards [B, T], kl [B, T]), both 0 on padding

Worked example, β = 0.1, k1: 2 of 3 tokens real, KL = (1, −0.5) on them (k1 can be negative);
the score 1 lands on token 1: r = (−0.1, 0.05 + 1, 0).

    >>> rewards, kl = kl_penalized_rewards(torch.tensor([1.0]), torch.tensor([[-1., -1.5, 5.]]),
    ...                                    torch.tensor([[-2., -1., 0.]]), torch.tensor([[1., 1., 0.]]), 0.1)
    >>> rewards, kl
    (tensor([[-0.1000,  1.0500,  0.0000]]), tensor([[ 1.0000, -0.5000,  0.0000]]))

You may use your own (or ``ladder.core``'s) ``kl_estimate`` and ``ladder.core.last_step_mask``
(the one-hot of each row's last real token).
Mirrors ``ladder.core.kl_penalized_rewards``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run ppo-sentiment --preset tiny --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def kl_penalized_rewards(scores: Tensor, old_logp: Tensor, ref_logp: Tensor, mask: Tensor,
                         kl_coef: float, estimator: str = "k1") -> tuple[Tensor, Tensor]:
    """(r_t = −β·KL_t + [t = last]·score, KL_t), both 0 on padding."""
    raise NotImplementedError
