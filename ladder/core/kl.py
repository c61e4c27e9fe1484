"""Estimating KL(π_θ ‖ π_ref) from the log-probs of sampled actions, and controlling β.

With log-ratio ℓ = log π_ref(a) − log π_θ(a) for a ~ π_θ (Schulman, "Approximating KL"):

    k1 = −ℓ                     unbiased, high variance, can be negative
    k2 = ℓ² / 2                 biased, low variance, ≥ 0
    k3 = (e^ℓ − 1) − ℓ          unbiased, low variance, ≥ 0     (GRPO's choice)

These expectations hold for samples from π_θ. When the batch was sampled by π_old and reused after
an optimiser step (μ > 1 passes, or several minibatches), π_θ ≠ π_old and the plain average is
biased. Importance weighting fixes it for k1 and k3:

    E_{a ~ π_old}[ (π_θ(a) / π_old(a)) · k(a) ] = E_{a ~ π_θ}[ k(a) ]  = KL(π_θ ‖ π_ref) for k1, k3
                                                                     ≠ KL for k2 (E_θ[ℓ²/2])

π_old does not depend on θ and the weight keeps its gradient, so the gradient of the weighted k1 or k3
is an unbiased estimate of ∇KL(π_θ ‖ π_ref). With π_θ = π_old the weight is exactly 1: the two forms
have equal values, not equal gradients.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .batch import last_step_mask
from .swappable import swappable

ESTIMATORS = ("k1", "k2", "k3")


@swappable
def kl_estimate(logp: Tensor, ref_logp: Tensor, estimator: str = "k3",
                old_logp: Tensor | None = None) -> Tensor:
    """Per-action estimate of KL(π_θ ‖ π_ref), shape of ``logp``.

    With ``old_logp`` given, each estimate is importance-weighted by π_θ/π_old (the unbiased form
    for samples drawn from π_old); without it, the plain estimate.
    """
    log_ratio = ref_logp - logp
    if estimator == "k1":
        kl = -log_ratio
    elif estimator == "k2":
        kl = 0.5 * log_ratio**2
    elif estimator == "k3":
        kl = torch.expm1(log_ratio) - log_ratio
    else:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if old_logp is not None:
        kl = torch.exp(logp - old_logp) * kl
    return kl


@swappable
def kl_penalized_rewards(scores: Tensor, old_logp: Tensor, ref_logp: Tensor, mask: Tensor,
                         kl_coef: float, estimator: str = "k1") -> tuple[Tensor, Tensor]:
    """PPO-RLHF's per-token reward: the KL goes into the reward, before advantages.

        r_t  = −β · KL_t + [t = last] · score
        KL_t = k(log π_old(a_t), log π_ref(a_t))          (k1: log π_old − log π_ref)

    ``scores`` is [B] (one score per sequence, from a reward model); ``old_logp`` is the log-probs of
    π_old, the policy that sampled. Returns (rewards [B, T], kl [B, T]), both zero on padding.
    """
    kl = kl_estimate(old_logp, ref_logp, estimator) * mask
    rewards = -kl_coef * kl + last_step_mask(mask) * scores[:, None]
    return rewards, kl


@swappable
def kl_in_reward(rewards: Tensor, old_logp: Tensor, ref_logp: Tensor, mask: Tensor, kl_coef: float,
                 estimator: str = "k1") -> tuple[Tensor, Tensor]:
    """Critic-free KL shaping: one KL per completion, subtracted from its reward before advantages.

        KL_i = Σ_t m_t · k(log π_old(a_t), log π_ref(a_t))          (k1: log π_old − log π_ref)
        r̃_i  = r_i − β · KL_i

    The estimate is taken on π_old, the policy that sampled the batch, and is a constant (no
    gradient): the KL reaches θ only through the advantages, so it is the same number on every
    one of the μ passes — the seeds' second fix for μ ≠ 1, and TRL's RLOO (k1, summed per
    completion). ``rewards`` [B]; returns (shaped rewards [B], KL_i [B]).
    """
    per_token = kl_estimate(old_logp, ref_logp, estimator)
    kl = torch.where(mask.bool(), per_token, 0.0).sum(dim=1).detach()
    return rewards - kl_coef * kl, kl


class FixedKLController:
    """β stays where it is set."""

    def __init__(self, kl_coef: float):
        self.value = kl_coef

    def update(self, current_kl: float, n_steps: int) -> float:
        return self.value

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.value = state["value"]


class AdaptiveKLController(FixedKLController):
    """Ziegler et al. 2019: steer the measured KL towards a target with a proportional rule.

        e = clip(KL / target − 1, −0.2, 0.2)
        β ← β · (1 + e · n_steps / horizon)
    """

    def __init__(self, init_kl_coef: float, target: float, horizon: float):
        super().__init__(init_kl_coef)
        self.target = target
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> float:
        if math.isfinite(current_kl):
            error = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
            self.value *= 1.0 + error * n_steps / self.horizon
        return self.value
