"""Solution to exercise 29 — the generalized JSD β·KL(p ‖ m) + (1 − β)·KL(q ‖ m), m = β·p + (1 − β)·q, with the
forward KL at β = 0 and the reverse KL at β = 1."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def kl(log_a: Tensor, log_b: Tensor) -> Tensor:
    """KL(a ‖ b) = Σ_v a_v·(log a_v − log b_v) over the vocabulary (the last dimension), from log-probabilities."""
    return (log_a.exp() * (log_a - log_b)).sum(dim=-1)


def generalized_jsd(student_logits: Tensor, teacher_logits: Tensor, beta: float = 0.5,
                    temperature: float = 1.0) -> Tensor:
    """JSD_β(π_teacher, π_θ) at every position: ``[..., V]`` logits → ``[...]`` (β = 0: KL(p ‖ q), β = 1: KL(q ‖ p))."""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    log_q = torch.log_softmax(student_logits / temperature, dim=-1)     # the student's, π_θ
    log_p = torch.log_softmax(teacher_logits / temperature, dim=-1)     # the teacher's
    if beta == 0.0:
        return kl(log_p, log_q)                                          # forward KL: TRL's case, not a limit
    if beta == 1.0:
        return kl(log_q, log_p)                                          # reverse KL
    log_m = torch.logsumexp(torch.stack([log_p + math.log(beta), log_q + math.log1p(-beta)]), dim=0)
    return beta * kl(log_p, log_m) + (1.0 - beta) * kl(log_q, log_m)
