"""Exercise 14 — the KL in the reward, one per completion (RLOO, TRL; the grpo rung's --kl-in reward).

Goes with notebook 6, section “2 · KL in the loss: values vs gradients”.

GRPO puts β·KL into the loss, token by token (exercise 8). Critic-free methods can instead
charge each completion its KL to π_ref once, in the reward, before the advantages are taken
(exercises 10 and 13):

    KL_i = Σ_t m_t · k(log π_old(a_t), log π_ref(a_t))      k1: log π_old − log π_ref (exercise 7)
    r̃_i  = r_i − β · KL_i

    rewards    [B]     one reward per completion
    old_logp   [B, T]  log π_old(a_t), of the policy that sampled the batch
    ref_logp   [B, T]  log π_ref(a_t)
    mask       [B, T]  1 for real tokens (right-padded; a row may be empty)
    kl_coef    float   β
    estimator  str     "k1", "k2" or "k3", the per-token estimate k (exercise 7's, with logp = old_logp);
                       anything else: raise ValueError
    result     (rewards [B], kl [B]): r̃_i and KL_i

Summed over the tokens, not averaged: a long completion pays for every token. The KL is taken on
π_old and is a constant: no gradient may flow through it (detach it), so it reaches θ only
through the advantages and is the same number on every pass over the batch. Padding may hold
anything, inf and nan included. An empty row has KL 0.

Worked example, β = 0.1, k1: row 0 has two real tokens, KL = 1 − 0.5 = 0.5; row 1 has three,
KL = 0 + 0.5 + 0.5 = 1. So r̃ = (1 − 0.05, 0 − 0.1).

    >>> old = torch.tensor([[-1., -1.5, 7.], [-0.5, -0.5, -0.5]])
    >>> ref = torch.tensor([[-2., -1., 0.], [-0.5, -1., -1.]])
    >>> kl_in_reward(torch.tensor([1., 0.]), old, ref, torch.tensor([[1., 1., 0.], [1., 1., 1.]]), 0.1)
    (tensor([ 0.9500, -0.1000]), tensor([0.5000, 1.0000]))

You may use your own (or ``ladder.core``'s) ``kl_estimate``.
Mirrors ``ladder.core.kl_in_reward``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --qlora --algo rloo --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def kl_in_reward(rewards: Tensor, old_logp: Tensor, ref_logp: Tensor, mask: Tensor, kl_coef: float,
                 estimator: str = "k1") -> tuple[Tensor, Tensor]:
    """(r̃_i = r_i − β·KL_i, KL_i = Σ_t m_t · k(log π_old, log π_ref)), the KL a constant."""
    raise NotImplementedError
