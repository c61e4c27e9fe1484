"""Per-action losses and how they are averaged over a padded ``[B, T]`` batch.

Every loss here returns a per-action ``[B, T]`` tensor; ``aggregate`` turns it into a scalar.
Signs: these are quantities to *minimise*.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .swappable import swappable

AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "sum_over_constant")


@swappable
def pg_loss(logp: Tensor, advantages: Tensor) -> Tensor:
    """REINFORCE (Williams 1992): the log-derivative trick.

        L_t = −Â_t · log π_θ(a_t|s_t),    ∇L = −Â_t · ∇log π_θ(a_t|s_t)
    """
    return -advantages * logp


@swappable
def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """GSPO's importance ratio, one per completion (Zheng et al. 2025), as a log, ``[B, 1]``:

        log s_i = (1/|y_i|) Σ_t m_t · (log π_θ(a_t) − log π_old(a_t))
        s_i     = (π_θ(y_i) / π_old(y_i))^(1/|y_i|)       the geometric mean of the token ratios

    Every token of completion i then shares s_i, and the clip keeps or drops the whole completion.
    An empty row gets log s = 0.
    """
    real = mask.bool()
    total = torch.where(real, logp - old_logp, 0.0).sum(dim=1, keepdim=True)
    return total / real.sum(dim=1, keepdim=True).clamp(min=1).to(total.dtype)


@swappable
def clipped_surrogate(ratio: Tensor, advantages: Tensor, clip_eps_low: float,
                      clip_eps_high: float | None = None, delta: float | None = None) -> Tensor:
    """PPO's clipped surrogate (Schulman et al. 2017), with clip-higher (DAPO: ε_high ≥ ε_low).

        ρ_t = π_θ(a_t|s_t) / π_old(a_t|s_t)
        L_t = −min( ρ_t · Â_t,  clip(ρ_t, 1 − ε_low, 1 + ε_high) · Â_t )

    The gradient is zero exactly where the clipped branch is the smaller one: ρ > 1 + ε_high with
    Â > 0, and ρ < 1 − ε_low with Â < 0. Where Â < 0 and ρ is large, nothing bounds the term;
    two-sided clipping (INTELLECT-2, ``delta`` = c > 1 + ε_high) caps the unclipped branch too:

        L_t = −min( min(ρ_t, c) · Â_t,  clip(ρ_t, 1 − ε_low, 1 + ε_high) · Â_t )
    """
    if clip_eps_high is None:
        clip_eps_high = clip_eps_low
    clipped = torch.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    if delta is not None:
        ratio = torch.clamp(ratio, max=delta)
    return -torch.min(ratio * advantages, clipped * advantages)


def cispo_loss(logp: Tensor, ratio: Tensor, advantages: Tensor, max_weight: float) -> Tensor:
    """CISPO (MiniMax-M1 2025; ScaleRL's cap): clip the importance weight, not the update.

        L_t = −sg( min(ρ_t, ε_max) ) · Â_t · log π_θ(a_t|s_t)

    sg = stop-gradient. The weight is a constant per token, so every token keeps a REINFORCE
    gradient −w_t · Â_t · ∇log π_θ, only scaled down where π_θ has run far ahead of π_old; no
    token is dropped, where PPO's clip zeroes the gradient of the tokens outside [1 − ε, 1 + ε].
    """
    weight = torch.clamp(ratio, max=max_weight).detach()
    return -weight * advantages * logp


@swappable
def soft_gated_surrogate(ratio: Tensor, advantages: Tensor, temp_pos: float, temp_neg: float) -> Tensor:
    """A soft gate in place of the hard clip (SAPO, arXiv 2511.20347): a sigmoid of the ratio, scaled so
    that its slope at ρ = 1 is 1, as the unclipped surrogate's.

        τ_t = τ_pos if Â_t > 0 else τ_neg
        L_t = −(4/τ_t) · σ(τ_t · (ρ_t − 1)) · Â_t
        ∂L_t/∂ρ_t = −4 σ(1 − σ) · Â_t          1 at ρ = 1, fading smoothly as ρ leaves 1

    Where the clip switches a token's gradient off at a hard edge, the gate turns it down gradually,
    and a larger τ makes it fade faster (τ_neg > τ_pos: tokens with Â < 0 are damped sooner, as
    their unbounded ratios are the less stable side).
    """
    temperature = torch.where(advantages > 0, temp_pos, temp_neg)
    return -torch.sigmoid(temperature * (ratio - 1.0)) * 4.0 / temperature * advantages


@swappable
def gamma_weight(log_ratio: Tensor, mask: Tensor, advantages: Tensor, k_pos: float, lambda_pos: float,
                 k_neg: float, lambda_neg: float, sampler_log_weight: Tensor | None = None) -> Tensor:
    """A smooth, detached weight of each completion from its sequence ratio (VESPO, arXiv 2602.10693), ``[B, 1]``:

        log ρ_seq,i = Σ_t m_t · clamp(log ρ_t, −20, 20)  (+ Σ_t m_t · log(π_old/π_sampler), when given)
        φ(ρ_seq)    = e^λ · ρ_seq^k · e^(−λ·ρ_seq)        the gamma shape, φ(1) = 1, largest at ρ_seq = k/λ
        (k, λ)  = (k_pos, λ_pos) if Σ_t m_t · Â_t ≥ 0 else (k_neg, λ_neg)   the sign of Â_i on the real tokens

    A sequence-level Â is constant over the row's real tokens, so the pair follows the sign of Â_i (TRL reads it
    from its ``[B, 1]`` advantages) even where the row starts with masked tokens (Â·m = 0 there).
    log ρ_seq is clamped to [log 1e-8, 20] and λ to at least 1e-4; φ is computed as exp(λ + k·log ρ_seq − λ·ρ_seq),
    and a non-finite φ becomes 0. No gradient flows through φ: it scales REINFORCE's −Â·∇log π
    (``gamma_weighted``'s loss), large near ρ_seq = 1 and vanishing far off-policy on either side.
    """
    with torch.no_grad():
        real = mask.bool()
        log_w = torch.where(real, log_ratio.clamp(-20.0, 20.0), 0.0).sum(dim=1, keepdim=True)
        if sampler_log_weight is not None:
            log_w = log_w + torch.where(real, sampler_log_weight, 0.0).sum(dim=1, keepdim=True)
        log_w = log_w.clamp(math.log(1e-8), 20.0)
        nonneg = torch.where(real, advantages, 0.0).sum(dim=1, keepdim=True) >= 0  # not Â at t = 0: m_0 may be 0
        k = torch.where(nonneg, k_pos, k_neg)
        lam = torch.where(nonneg, lambda_pos, lambda_neg).clamp(min=1e-4)
        phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w))
        return phi.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


@swappable
def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, clip: float | None = None) -> Tensor:
    """Critic regression, optionally clipped around the values seen at sampling time.

        L_t = ½ (V(s_t) − R_t)²                                              (clip = None)
        L_t = ½ max( (V − R)², (V_old + clip(V − V_old, −c, c) − R)² )        (clip = c)
    """
    unclipped = (values - returns) ** 2
    if clip is None:
        return 0.5 * unclipped
    clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
    return 0.5 * torch.max(unclipped, (clipped_values - returns) ** 2)


def entropy_bonus(entropy: Tensor) -> Tensor:
    """L_t = −H(π_θ(·|s_t)): minimising it raises the entropy."""
    return -entropy


@swappable
def aggregate(per_action: Tensor, mask: Tensor, mode: str = "token_mean",
              num_tokens: float | None = None) -> Tensor:
    """Masked average of a per-action loss ``[B, T]`` → scalar.

        token_mean           Σ_{b,t} m·x / Σ_{b,t} m                    every action weighs the same
        seq_mean_token_mean  (1/B) Σ_b [ Σ_t m·x / Σ_t m ]             every sequence weighs the same
        seq_mean_token_sum   (1/B) Σ_b Σ_t m·x                          a sequence weighs its length
        sum_over_constant    Σ_{b,t} m·x / N                            N = num_tokens, a constant the
                                                                        caller computes (at least 1)

    The papers differ only in N, which the caller knows and the batch does not:

        GRPO (Shao et al. 2024)       seq_mean_token_mean
        TRL's "bnpo"                  token_mean
        Dr. GRPO (Liu et al. 2025)    sum_over_constant, N = rows · L_max: the generation budget, the same
                                      whatever the completions' lengths, so no length bias
        DAPO (Yu et al. 2025)         sum_over_constant, N = the real tokens of the whole batch over all
                                      processes ÷ processes, each minibatch dividing by its share of it
        LUSPO (arXiv 2602.05261)      seq_mean_token_sum: with GSPO's one ratio per sequence, each
                                      sequence's term scaled by its length, undoing the per-sequence mean

    ``num_tokens`` is required by ``sum_over_constant`` and ignored by the two averages.
    """
    per_action = torch.where(mask.bool(), per_action, 0.0)  # padding never leaks in, not even inf
    mask = mask.to(per_action.dtype)
    total = per_action.sum()
    if mode == "token_mean":
        return total / mask.sum().clamp(min=1.0)
    if mode == "seq_mean_token_mean":
        per_seq = per_action.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return per_seq.mean()
    if mode == "seq_mean_token_sum":
        return per_action.sum(dim=1).mean()
    if mode == "sum_over_constant":
        if num_tokens is None:
            raise ValueError("aggregation sum_over_constant divides by num_tokens: pass the constant N")
        return total / max(num_tokens, 1.0)
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {mode!r}")
