"""The policy term of the loss: one small spec per objective, its parameters as fields and its term as a method,
registered by name in ``OBJECTIVES``; ``UpdateConfig.objective`` holds a spec (or a registered name: its defaults).

Each term maps the minibatch's ratios and advantages to a per-token loss ``[B, T]`` through a function of
``losses`` (swappable, so ``--use-exercises`` replaces it there):

    Clipped        "clipped"         −min(ρ·Â, clip(ρ, 1 − ε_low, 1 + ε_high)·Â)   PPO, GRPO, DAPO, GSPO, LUSPO
                                     (ε from the UpdateConfig; with δ: ρ capped at δ where Â < 0)
    CISPO          "cispo"           −sg(min(ρ, ε_max))·Â·log π_θ                    CISPO
    SoftGate       "soft_gate"       −(4/τ)·σ(τ(ρ − 1))·Â                            SAPO
    GammaWeighted  "gamma_weighted"  −φ(w_i)·Â·log π_θ,  w_i the sequence ratio     VESPO
    Reinforce      "reinforce"       −Â·log π_θ                                      REINFORCE

and, for a minibatch of preference pairs instead of sampled experience (``preference_objectives.py``):

    BradleyTerry   "bradley_terry"   −log σ(r(x, y_w) − r(x, y_l))                    a reward model
    DPO            "dpo"             −log σ(β·[log π_θ/π_ref (y_w) − log π_θ/π_ref (y_l)])   DPO

A new objective is a frozen dataclass with ``name`` and ``term(x, cfg)``, registered with ``@objective``;
``compute_loss`` does not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

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
    ref_logp: Tensor | None = None  # log π_ref (None: no anchor in the batch); DPO reads it


class Objective(Protocol):
    """A policy term: its parameters are the spec's fields."""

    name: ClassVar[str]
    folds_sampler_weight: ClassVar[bool]   # the term weighs π_old/π_sampler itself (compute_loss does not again)

    def term(self, x: PolicyInputs, cfg) -> Tensor: ...


OBJECTIVES: dict[str, type] = {}  # name → the spec's class


def objective(cls: type) -> type:
    """Register an objective's spec under its ``name`` (a class decorator)."""
    OBJECTIVES[cls.name] = cls
    return cls


def objective_spec(chosen) -> Objective:
    """The spec ``UpdateConfig.objective`` names: itself, or a registered name's spec with its defaults."""
    if not isinstance(chosen, str):
        return chosen
    if chosen not in OBJECTIVES:
        raise ValueError(f"objective must be one of {tuple(OBJECTIVES)}, got {chosen!r}")
    return OBJECTIVES[chosen]()


@objective
@dataclass(frozen=True)
class Clipped:
    """−min(ρ·Â, clip(ρ, 1 − ε_low, 1 + ε_high)·Â), ε from the UpdateConfig (the statistics read it too)."""

    name: ClassVar[str] = "clipped"
    folds_sampler_weight: ClassVar[bool] = False
    delta: float | None = None   # δ: two-sided clipping caps ρ at δ where Â < 0 too (None: off)

    def term(self, x: PolicyInputs, cfg) -> Tensor:
        return clipped_surrogate(x.ratio, x.advantages, cfg.clip_eps_low, cfg.eps_high, self.delta)


@objective
@dataclass(frozen=True)
class CISPO:
    """−sg(min(ρ, ε_max))·Â·log π_θ."""

    name: ClassVar[str] = "cispo"
    folds_sampler_weight: ClassVar[bool] = False
    max_weight: float = 5.0      # ε_max: the cap on the detached importance weight

    def term(self, x: PolicyInputs, cfg) -> Tensor:
        return cispo_loss(x.logp, x.ratio, x.advantages, self.max_weight)


@objective
@dataclass(frozen=True)
class SoftGate:
    """−(4/τ)·σ(τ(ρ − 1))·Â, τ = τ_pos where Â > 0 and τ_neg where Â ≤ 0."""

    name: ClassVar[str] = "soft_gate"
    folds_sampler_weight: ClassVar[bool] = False
    temp_pos: float = 1.0
    temp_neg: float = 1.05

    def term(self, x: PolicyInputs, cfg) -> Tensor:
        return soft_gated_surrogate(x.ratio, x.advantages, self.temp_pos, self.temp_neg)


@objective
@dataclass(frozen=True)
class GammaWeighted:
    """−φ(w_i)·Â·log π_θ with φ(w) = e^λ·w^k·e^(−λ·w), (k, λ) by the sign of Â; the sampler's weight
    π_old/π_sampler folded into w_i (not multiplied after)."""

    name: ClassVar[str] = "gamma_weighted"
    folds_sampler_weight: ClassVar[bool] = True
    k_pos: float = 2.0           # k, λ of φ where Â ≥ 0
    lambda_pos: float = 3.0
    k_neg: float = 3.0           # k, λ of φ where Â < 0
    lambda_neg: float = 2.0

    def term(self, x: PolicyInputs, cfg) -> Tensor:
        sampler_log_weight = None if x.sampler_weight is None else x.sampler_weight.clamp(min=1e-8).log()
        phi = gamma_weight(x.token_log_ratio, x.mask, x.advantages, self.k_pos, self.lambda_pos, self.k_neg,
                           self.lambda_neg, sampler_log_weight)
        return -phi * x.advantages * x.logp


@objective
@dataclass(frozen=True)
class Reinforce:
    """−Â·log π_θ."""

    name: ClassVar[str] = "reinforce"
    folds_sampler_weight: ClassVar[bool] = False

    def term(self, x: PolicyInputs, cfg) -> Tensor:
        return pg_loss(x.logp, x.advantages)
