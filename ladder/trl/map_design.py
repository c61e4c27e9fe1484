"""TRL 1.16's newer GRPO options → ladder's grpo options: the objectives SAPO, LUSPO and VESPO, GDPO's reward
aggregation, the entropy-quantile mask, the entropy bonus and its adaptive control, and the lagging π_rollout.
Rows of ``trl_map`` (see its docstring for the columns)."""

from __future__ import annotations

from ladder import core
from ladder.rungs.grpo import entropy_control, loss_types
from ladder.trl_rows import Mapping, same

G = "GRPOConfig"
NONE = None  # no TRL equivalent


DESIGN_ROWS = (
    *loss_types.trl_rows(core.SoftGate, core.GammaWeighted),  # the objectives' own flags (loss_types)
    Mapping(G, "multi_objective_aggregation", "grpo", "multi_objective_aggregation", "decoupled_group_relative",
            "sum_then_normalize (group_relative of Σ_f w_f·r_f) | normalize_then_sum (GDPO)",
            same("multi_objective_aggregation")),
    Mapping(G, "top_entropy_quantile", "grpo", "top_entropy_quantile", "high_entropy_mask",
            "q: the top-q entropy tokens take part in the policy term. TRL takes the quantile over every process's "
            "tokens, ladder over this process's minibatch (the same with one process)", same("top_entropy_quantile")),
    Mapping(G, "entropy_coef", "grpo", "entropy_coef", "entropy_bonus",
            "c_H of −c_H·mean H over the kept tokens, whatever the loss type", same("entropy_coef")),
    Mapping(G, "use_adaptive_entropy", "grpo", "adaptive_entropy", "AdaptiveEntropyCoef",
            "c_H moved by ±Δ after each optimiser step, applied at or below the target", same("adaptive_entropy")),
    *entropy_control.trl_rows(),  # --adaptive-entropy's settings (entropy_control)
    Mapping(G, NONE, "grpo", "max_staleness", "sampler_weights",
            "GRPOTrainer samples with the current weights. trl.experimental.async_grpo produces rollouts while "
            "training goes on, so each batch is some updates stale, by timing rather than by a fixed k; ladder's "
            "lag is exact and seeded. Correct it with vllm_importance_sampling_* as --sampler-correction does",
            applies=lambda cfg: cfg.max_staleness > 0),
)
