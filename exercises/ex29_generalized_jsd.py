"""Exercise 29 — the generalized JSD: forward KL, reverse KL, and every mixture between (GKD).

Goes with notebook 10, section “2 · Forward, reverse and between: the generalized JSD”.

Exercise 28 scores only the token the student sampled. With the teacher's logits at hand, the whole next-token
distributions can be compared instead (GKD, Agarwal et al. 2024; TRL's ``GKDTrainer.generalized_jsd_loss``). At each
position, with the temperature τ dividing both logits,

    q = softmax(z_student / τ)     p = softmax(z_teacher / τ)     m = β·p + (1 − β)·q      (over the vocabulary)

    JSD_β(p, q) = β·KL(p ‖ m) + (1 − β)·KL(q ‖ m)          0 < β < 1;  KL(a ‖ b) = Σ_v a_v·(log a_v − log b_v)
    β = 0:  KL(p ‖ q)      the forward KL: mass-covering, the student spread over all the teacher's tokens
    β = 1:  KL(q ‖ p)      the reverse KL: mode-seeking, what exercise 28's sampled reward estimates

The ends are TRL's special cases, not limits of the formula: JSD_β itself goes to 0 at both ends (≈ β·KL(p ‖ q)
near β = 0, ≈ (1 − β)·KL(q ‖ p) near β = 1, since m → q or m → p), so β = 0 and β = 1 must be computed as the two
KLs. In between, take log m by logsumexp, never as the log of m:

    log m = logsumexp(log p + log β, log q + log(1 − β))      log p, log q by log_softmax

A token both p and q give probability 0 (float32's exp underflows past gaps of about 104) has m = 0: log m is
−inf and 0·(log p − log m) is nan; logsumexp of two finite log-probs stays finite. Logits must be finite (a −inf
logit gives 0·(−inf) = nan at the ends too: mask a token with a large negative logit instead). β outside [0, 1]:
ValueError; τ is taken as given (τ > 0 is the caller's to check).

    student_logits  [B, T, V]  the student's logits (any [..., V]: the vocabulary is the last dimension)
    teacher_logits  [B, T, V]  the teacher's, same shape
    beta            β in [0, 1]
    temperature     τ > 0, divides both logits
    result          [B, T]     JSD_β at every position, differentiable in both logits (the caller passes the
                               teacher's without grad: it is frozen)

Worked example, three tokens: the student is sure of token 0, the teacher prefers token 1:

    >>> student = torch.tensor([2.0, 0.0, -2.0])    # q ≈ [0.867, 0.117, 0.016]
    >>> teacher = torch.tensor([0.0, 1.0, 0.0])     # p ≈ [0.212, 0.576, 0.212]
    >>> [round(generalized_jsd(student, teacher, beta).item(), 4) for beta in (0.0, 0.5, 1.0)]
    [1.1676, 0.2395, 0.9931]
    >>> [round(generalized_jsd(student, teacher, beta).item(), 4) for beta in (0.01, 0.99)]   # → 0 at both ends
    [0.0114, 0.0098]
    >>> round(generalized_jsd(teacher, student, 0.5).item(), 4)     # β = ½ is symmetric in p and q
    0.2395
    >>> round(generalized_jsd(student, teacher, 0.0, temperature=2.0).item(), 4)    # τ = 2 softens both: closer
    0.3392
    >>> generalized_jsd(torch.stack([student, teacher]), torch.stack([teacher, student]), 0.0)   # [2, 3] → [2]
    tensor([1.1676, 0.9931])

The last line's second row has the two swapped: its forward KL is the first row's reverse KL.

GKDTrainer averages it over the completion tokens (``aggregate(jsd, mask, "token_mean")``, exercise 11);
``GKDConfig.beta`` is β, ``GKDConfig.temperature`` τ, and ``GKDConfig.lmbda`` the share of batches the student
generates itself (on-policy). ladder's ``distill`` rung trains on exercise 28's sampled reward (β = 1's one-sample
estimate) and does not call this one: it is graded, not swapped into a run.

Mirrors ``ladder.core.generalized_jsd``. Grade it: ``pytest exercises/``.
"""

from __future__ import annotations

import math  # noqa: F401 - math.log(β), math.log1p(−β)

import torch  # noqa: F401 - you will need it
from torch import Tensor


def generalized_jsd(student_logits: Tensor, teacher_logits: Tensor, beta: float = 0.5,
                    temperature: float = 1.0) -> Tensor:
    """JSD_β(π_teacher, π_θ) at every position: ``[..., V]`` logits → ``[...]`` (β = 0: KL(p ‖ q), β = 1: KL(q ‖ p))."""
    raise NotImplementedError
