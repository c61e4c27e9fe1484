"""Learning from a teacher: π_teacher where π_ref was, and two views of the divergence the student descends.

The policy-gradient view (on-policy distillation). The student π_θ samples y; the teacher scores every token the
student sampled; each token's reward is the k1 estimate of the reverse KL (``kl_estimate``'s k1, with π_teacher in
π_ref's place), so every token gets a signal where a rule reward gives a completion one number:

    r_t = −(log π_θ(y_t | y_<t) − log π_teacher(y_t | y_<t))                   distillation_rewards

Summed without discount (γ = 1: G_t = Σ_{t' ≥ t} r_t'), the policy gradient is the whole sequence's reverse KL:

    E_{y ~ π_θ}[ Σ_t ∇log π_θ(y_t | y_<t) · G_t ] = −∇ KL(π_θ ‖ π_teacher)      (over whole completions)

and with γ = 0 (G_t = r_t) it is each position's reverse KL at the prefixes the student reached, those held fixed:
−E_{y ~ π_θ}[ Σ_t ∇_θ KL(π_θ(· | y_<t) ‖ π_teacher(· | y_<t)) ] — GKD's gradient at β = 1 below. ``core.update``
trains on either like on any reward (tests/test_core_distillation.py enumerates both identities).

The logit view (GKD, Agarwal et al. 2024; TRL's ``GKDTrainer.generalized_jsd_loss``). At each position the whole
next-token distributions q = π_θ and p = π_teacher (each the softmax of its logits / τ), and with the mixture
m = β·p + (1 − β)·q:

    generalized_jsd   JSD_β(p, q) = β·KL(p ‖ m) + (1 − β)·KL(q ‖ m)             0 < β < 1
                      β = 0:  KL(p ‖ q)   the forward KL: mass-covering, SFT on the teacher's whole distribution
                      β = 1:  KL(q ‖ p)   the reverse KL: mode-seeking, what the sampled k1 reward estimates

The two ends are TRL's own cases: JSD_β itself vanishes there (JSD_β ≈ β·KL(p ‖ q) near β = 0 and
≈ (1 − β)·KL(q ‖ p) near β = 1), so β = 0 and β = 1 are not its limits but the two KLs it interpolates between in
shape. GKDTrainer averages it over the completion tokens of the batch: ``aggregate(·, mask, "token_mean")``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .kl import kl_estimate
from .swappable import swappable


@swappable
def distillation_rewards(logp: Tensor, teacher_logp: Tensor, mask: Tensor) -> Tensor:
    """r_t = −(log π_θ − log π_teacher)(y_t) on each sampled token, ``[B, T]``, 0 on padding: the k1 estimate of
    the reverse KL per token, negated (``kl_estimate(logp, teacher_logp, "k1")``). The reward is a number, not a
    path for gradients: call it with log-probs taken without grad, or detach them."""
    per_token = -kl_estimate(logp, teacher_logp, "k1")
    return torch.where(mask.bool(), per_token, 0.0)


def _kl(log_a: Tensor, log_b: Tensor) -> Tensor:
    """KL(a ‖ b) = Σ_v a_v·(log a_v − log b_v) over the last dimension, from log-probabilities."""
    return (log_a.exp() * (log_a - log_b)).sum(dim=-1)


@swappable
def generalized_jsd(student_logits: Tensor, teacher_logits: Tensor, beta: float = 0.5,
                    temperature: float = 1.0) -> Tensor:
    """JSD_β(π_teacher, π_θ) at every position, ``[..., V]`` logits → ``[...]`` (0 ≤ β ≤ 1; τ divides both logits).

    β = 0: KL(p ‖ q), forward; β = 1: KL(q ‖ p), reverse; between: β·KL(p ‖ m) + (1 − β)·KL(q ‖ m), m = β·p + (1 − β)·q
    (its log by logsumexp, as TRL computes it)."""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    log_q = torch.log_softmax(student_logits / temperature, dim=-1)
    log_p = torch.log_softmax(teacher_logits / temperature, dim=-1)
    if beta == 0.0:
        return _kl(log_p, log_q)
    if beta == 1.0:
        return _kl(log_q, log_p)
    log_m = torch.logsumexp(torch.stack([log_q + math.log1p(-beta), log_p + math.log(beta)]), dim=0)
    return beta * _kl(log_p, log_m) + (1.0 - beta) * _kl(log_q, log_m)
