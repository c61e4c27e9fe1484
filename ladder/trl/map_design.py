"""TRL 1.16's newer GRPO options → ladder's grpo options: the objectives SAPO, LUSPO and VESPO, GDPO's reward
aggregation, the entropy-quantile mask, the entropy bonus and its adaptive control, and the lagging π_rollout.
Rows of ``trl_map`` (see its docstring for the columns)."""

from __future__ import annotations

from ladder.trl.row import Mapping, same

G = "GRPOConfig"
NONE = None  # no TRL equivalent


def _loss_type(name: str):
    return lambda cfg: cfg.loss_type == name


DESIGN_ROWS = (
    Mapping(G, "sapo_temperature_pos", "grpo", "sapo_temperature_pos", "soft_gated_surrogate",
            "τ_pos of the soft gate −(4/τ)·σ(τ(ρ − 1))·Â where Â > 0", same("sapo_temperature_pos"),
            _loss_type("sapo")),
    Mapping(G, "sapo_temperature_neg", "grpo", "sapo_temperature_neg", "soft_gated_surrogate",
            "τ_neg of the soft gate where Â ≤ 0", same("sapo_temperature_neg"), _loss_type("sapo")),
    Mapping(G, "vespo_k_pos", "grpo", "vespo_k_pos", "gamma_weight",
            "k of φ(ρ_seq) = e^λ·ρ_seq^k·e^(−λ·ρ_seq) where Â ≥ 0", same("vespo_k_pos"), _loss_type("vespo")),
    Mapping(G, "vespo_lambda_pos", "grpo", "vespo_lambda_pos", "gamma_weight", "λ of φ where Â ≥ 0",
            same("vespo_lambda_pos"), _loss_type("vespo")),
    Mapping(G, "vespo_k_neg", "grpo", "vespo_k_neg", "gamma_weight", "k of φ where Â < 0", same("vespo_k_neg"),
            _loss_type("vespo")),
    Mapping(G, "vespo_lambda_neg", "grpo", "vespo_lambda_neg", "gamma_weight", "λ of φ where Â < 0",
            same("vespo_lambda_neg"), _loss_type("vespo")),
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
    Mapping(G, "entropy_target", "grpo", "entropy_target", "AdaptiveEntropyCoef", "H_target",
            same("entropy_target"), lambda cfg: cfg.adaptive_entropy),
    Mapping(G, "entropy_coef_min", "grpo", "entropy_coef_min", "AdaptiveEntropyCoef", "c_min",
            same("entropy_coef_min"), lambda cfg: cfg.adaptive_entropy),
    Mapping(G, "entropy_coef_max", "grpo", "entropy_coef_max", "AdaptiveEntropyCoef", "c_max",
            same("entropy_coef_max"), lambda cfg: cfg.adaptive_entropy),
    Mapping(G, "entropy_coef_delta", "grpo", "entropy_coef_delta", "AdaptiveEntropyCoef", "Δ",
            same("entropy_coef_delta"), lambda cfg: cfg.adaptive_entropy),
    Mapping(G, NONE, "grpo", "max_staleness", "sampler_weights",
            "GRPOTrainer samples with the current weights. trl.experimental.async_grpo produces rollouts while "
            "training goes on, so each batch is some updates stale, by timing rather than by a fixed k; ladder's "
            "lag is exact and seeded. Correct it with vllm_importance_sampling_* as --sampler-correction does",
            applies=lambda cfg: cfg.max_staleness > 0),
)
