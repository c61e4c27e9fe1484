"""The shared policy-gradient core: pure torch, no environments, no tokenizers.

Rungs build a ``Batch`` of ``[B, T]`` tensors and call ``update``; everything else here is the
math that ``update`` and the rungs share.

Every function an exercise mirrors (``gae``, ``clipped_surrogate``, ``compute_loss``, ``update``, …) is
``@swappable``: each call goes through one table, so ``--use-exercises`` replaces it in that one place
(``swappable.py``, ``ladder.graders.swap``).
"""

from .advantages import (
    decoupled_group_relative,
    discounted_returns,
    gae,
    group_relative,
    group_relative_turns,
    leave_one_out,
    masked_gae,
    whiten,
)
from .batch import Batch, last_step_mask
from .distillation import distillation_rewards, generalized_jsd
from .entropy import AdaptiveEntropyCoef, high_entropy_mask
from .kl import AdaptiveKLController, FixedKLController, kl_estimate, kl_in_reward, kl_penalized_rewards
from .logprobs import token_logp
from .losses import (
    aggregate,
    cispo_loss,
    clipped_surrogate,
    entropy_bonus,
    gamma_weight,
    pg_loss,
    sequence_log_ratio,
    soft_gated_surrogate,
    value_loss,
)
from .objectives import (
    CISPO,
    OBJECTIVES,
    Clipped,
    GammaWeighted,
    Objective,
    PolicyInputs,
    Reinforce,
    SoftGate,
    objective,
    objective_spec,
)
from .off_policy import (
    CORRECTIONS,
    SamplerOptions,
    corrected_weights,
    off_policy_keep,
    sampler_correction,
    sampler_log_ratio,
    sampler_weights,
)
from .preference_objectives import DPO, BradleyTerry
from .preferences import bradley_terry_loss, dpo_loss, implicit_reward, pair_statistics, sequence_logp
from .reference import soft_update
from .stats import (
    REDUCTIONS,
    approx_kl_old,
    clip_fractions,
    explained_variance,
    masked_mean,
    ratio_stats,
    reduce_stats,
    step_counts,
)
from .update import Policy, UpdateConfig, compute_loss, update

__all__ = [
    "Batch", "last_step_mask", "token_logp",
    "discounted_returns", "gae", "masked_gae", "group_relative", "decoupled_group_relative", "group_relative_turns",
    "leave_one_out", "whiten",
    "kl_estimate", "kl_penalized_rewards", "kl_in_reward", "FixedKLController", "AdaptiveKLController",
    "distillation_rewards", "generalized_jsd",
    "pg_loss", "clipped_surrogate", "cispo_loss", "soft_gated_surrogate", "gamma_weight", "sequence_log_ratio",
    "value_loss", "entropy_bonus", "aggregate",
    "OBJECTIVES", "Objective", "objective", "objective_spec", "Clipped", "CISPO", "SoftGate", "GammaWeighted",
    "Reinforce", "PolicyInputs",
    "high_entropy_mask", "AdaptiveEntropyCoef",
    "soft_update",
    "sequence_logp", "bradley_terry_loss", "implicit_reward", "dpo_loss", "pair_statistics", "BradleyTerry", "DPO",
    "CORRECTIONS", "SamplerOptions", "corrected_weights", "sampler_log_ratio", "sampler_weights", "off_policy_keep",
    "sampler_correction",
    "clip_fractions", "approx_kl_old", "ratio_stats", "explained_variance", "masked_mean", "REDUCTIONS", "reduce_stats",
    "step_counts",
    "Policy", "UpdateConfig", "compute_loss", "update",
]
