"""The policy term of the loss, one short function per objective, picked from ``POLICY_TERMS`` by
``UpdateConfig.objective``.

Each term maps the minibatch's ratios and advantages to a per-token loss ``[B, T]`` through a function of
``losses`` (swappable, so ``--use-exercises`` replaces it there):

    clipped         −min(ρ·Â, clip(ρ, 1 − ε_low, 1 + ε_high)·Â)        PPO, GRPO, DAPO, GSPO, LUSPO
    cispo           −sg(min(ρ, ε_max))·Â·log π_θ                         CISPO
    soft_gate       −(4/τ)·σ(τ(ρ − 1))·Â                                 SAPO
    gamma_weighted  −φ(w_i)·Â·log π_θ,  w_i the sequence ratio          VESPO
    reinforce       −Â·log π_θ                                           REINFORCE

A new objective is a function here and a row in the table; ``compute_loss`` does not change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from .losses import cispo_loss, clipped_surrogate, gamma_weight, pg_loss, soft_gated_surrogate


@dataclass
class PolicyInputs:
    """What every policy term may read, each ``[B, T]`` (``ratio`` and ``log_ratio`` at the configured level:
    per token, or GSPO's one per row broadcast along it)."""

    logp: Tensor                   # log π_θ, with its graph
    log_ratio: Tensor              # log ρ = log π_θ − log π_old (0 on padding)
    ratio: Tensor                  # ρ = exp(log ρ)
    token_log_ratio: Tensor        # log π_θ − log π_old per token, whatever the level (0 on padding)
    advantages: Tensor             # Â (0 on padding)
    mask: Tensor                   # 1 on the real tokens
    sampler_weight: Tensor | None  # w = π_old/π_sampler, corrected (None: π_sampler = π_old, or no correction)


def clipped_term(x: PolicyInputs, cfg) -> Tensor:
    return clipped_surrogate(x.ratio, x.advantages, cfg.clip_eps_low, cfg.eps_high, cfg.delta)


def cispo_term(x: PolicyInputs, cfg) -> Tensor:
    return cispo_loss(x.logp, x.ratio, x.advantages, cfg.cispo_max_weight)


def soft_gate_term(x: PolicyInputs, cfg) -> Tensor:
    return soft_gated_surrogate(x.ratio, x.advantages, cfg.gate_temp_pos, cfg.gate_temp_neg)


def gamma_weighted_term(x: PolicyInputs, cfg) -> Tensor:
    """−φ(w_i)·Â·log π_θ, the sampler's weight π_old/π_sampler folded into w_i (not multiplied after)."""
    sampler_log_weight = None if x.sampler_weight is None else x.sampler_weight.clamp(min=1e-8).log()
    phi = gamma_weight(x.token_log_ratio, x.mask, x.advantages, cfg.gamma_k_pos, cfg.gamma_lambda_pos,
                       cfg.gamma_k_neg, cfg.gamma_lambda_neg, sampler_log_weight)
    return -phi * x.advantages * x.logp


def reinforce_term(x: PolicyInputs, cfg) -> Tensor:
    return pg_loss(x.logp, x.advantages)


POLICY_TERMS: dict[str, Callable[[PolicyInputs, object], Tensor]] = {
    "clipped": clipped_term, "cispo": cispo_term, "soft_gate": soft_gate_term,
    "gamma_weighted": gamma_weighted_term, "reinforce": reinforce_term}

# Objectives whose term weighs π_old/π_sampler itself: compute_loss does not multiply by it again.
FOLDS_SAMPLER_WEIGHT = frozenset({"gamma_weighted"})
