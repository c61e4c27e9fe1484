"""``ladder.trl.map``'s rows for RLOOConfig (the grpo rung with ``--algo rloo``) and for the classic PPOConfig and
PPOTrainer (TRL ≤ 0.11, the RLHF articles) against ppo-sentiment."""

from __future__ import annotations

from ladder.trl_rows import Mapping

# --- RLOO: RLOOConfig ↔ the grpo rung with --algo rloo (advantage rloo, KL in the reward, k1) --------

R = "RLOOConfig"
RLOO_ROWS = (
    Mapping(R, "num_generations", "grpo", "group_size", "leave_one_out", "G completions per prompt"),
    Mapping(R, "beta", "grpo", "kl_coef", "kl_in_reward",
            "β of the KL in the reward: --kl-in reward --kl-estimator k1 (Σ_t over the completion, on π_old)"),
    Mapping(R, "normalize_advantages", "grpo", "scale_rewards", "leave_one_out",
            "True ↔ --scale-rewards batch (Â whitened over the batch), False ↔ none"),
    Mapping(R, "epsilon", "grpo", "clip_eps", "clipped_surrogate",
            "RLOOTrainer clips one ratio of summed log-probs per completion, ladder per token "
            "(tests/test_trl_parity_grpo pins the difference)"),
    Mapping(R, "epsilon_high", "grpo", "clip_eps_high", "clipped_surrogate", ""),
    Mapping(R, "num_iterations", "grpo", "mu", "update", "as GRPOConfig's"),
    Mapping(R, "steps_per_generation", "grpo", "num_minibatches", "update", "as GRPOConfig's"),
    Mapping(R, "per_device_train_batch_size", "grpo", "prompts_per_step", "update", "as GRPOConfig's: P·G/M"),
    Mapping(R, "max_steps", "grpo", "steps", None, "as GRPOConfig's: --steps × μ × M"),
    Mapping(R, "max_completion_length", "grpo", "max_new_tokens", None, ""),
    Mapping(R, "temperature", "grpo", "temperature", None, ""),
    Mapping(R, "top_p", "grpo", "top_p", None, ""),
    Mapping(R, "learning_rate", "grpo", "lr", None, ""),
    Mapping(R, "max_grad_norm", "grpo", "max_grad_norm", "update", ""),
    Mapping(R, "reward_weights", "grpo", "reward_weights", None, ""),
    Mapping(R, "mask_truncated_completions", "grpo", "mask_truncated", None, ""),
    Mapping(R, "sync_ref_model", "grpo", "ref_sync_every", "soft_update", "as GRPOConfig's"),
    Mapping(R, "ref_model_sync_steps", "grpo", "ref_sync_every", "soft_update", "optimiser steps"),
    Mapping(R, "ref_model_mixup_alpha", "grpo", "ref_mixup", "soft_update", ""),
    Mapping(R, "reward_clip_range", "grpo", None, None, "ladder does not clip rewards"),
    Mapping(R, "seed", "grpo", "seed", None, ""),
)

# --- classic PPO (TRL ≤ 0.11: PPOConfig + PPOTrainer.step, the RLHF articles) ↔ ppo-sentiment ----------

P = "PPOConfig"
PT = "PPOTrainer"
PPO_ROWS = (
    Mapping(P, "init_kl_coef", "ppo-sentiment", "kl_coef", "kl_penalized_rewards",
            "β of −β·KL_t in the per-token reward (the adaptive controller's start)"),
    Mapping(P, "adap_kl_ctrl", "ppo-sentiment", "adaptive_kl", "AdaptiveKLController",
            "off: FixedKLController"),
    Mapping(P, "target", "ppo-sentiment", "kl_target", "AdaptiveKLController", "target per-sequence KL"),
    Mapping(P, "horizon", "ppo-sentiment", "kl_horizon", "AdaptiveKLController", "in completions"),
    Mapping(P, "kl_penalty", "ppo-sentiment", "kl_estimator", "kl_estimate",
            "'kl' ↔ k1, 'mse' ↔ k2 (½ℓ²); 'abs' and 'full' have no ladder estimator"),
    Mapping(P, "cliprange", "ppo-sentiment", "clip_eps", "clipped_surrogate", "PPO's ε"),
    Mapping(P, "cliprange_value", "ppo-sentiment", "value_clip", "value_loss", "V clipped around V_old"),
    Mapping(P, "vf_coef", "ppo-sentiment", "value_coef", "value_loss", "c_v of the value loss in core.update"),
    Mapping(P, "gamma", "ppo-sentiment", "gamma", "gae", ""),
    Mapping(P, "lam", "ppo-sentiment", "gae_lambda", "gae", ""),
    Mapping(P, "ppo_epochs", "ppo-sentiment", "mu", "update", "μ passes over each batch"),
    Mapping(P, "mini_batch_size", "ppo-sentiment", "num_minibatches", "update",
            "num_minibatches = batch_size / (mini_batch_size × gradient_accumulation_steps)"),
    Mapping(P, "gradient_accumulation_steps", "ppo-sentiment", "num_minibatches", "update",
            "ladder accumulates nothing: one optimiser step per minibatch (see mini_batch_size)"),
    Mapping(P, "batch_size", "ppo-sentiment", "batch_size", None, "completions per PPOTrainer.step / update"),
    Mapping(P, "learning_rate", "ppo-sentiment", "lr", None, "the articles' 1.41e-5 is ladder's default"),
    Mapping(P, "max_grad_norm", "ppo-sentiment", "max_grad_norm", "update", ""),
    Mapping(P, "steps", "ppo-sentiment", "steps", None,
            "counts samples: ppo epochs = ceil(steps / batch_size), so ladder's steps = TRL's steps / batch_size"),
    Mapping(P, "seed", "ppo-sentiment", "seed", None, ""),
    Mapping(P, "model_name", "ppo-sentiment", "model", None,
            "tracking only in TRL; the articles load lvwerra/gpt2-imdb"),
    Mapping(P, "query_dataset", "ppo-sentiment", "dataset", None, "tracking only in TRL; the articles use imdb"),
    Mapping(P, "reward_model", "ppo-sentiment", "reward_model", None,
            "tracking only in TRL; the articles score with lvwerra/distilbert-imdb's POSITIVE logit"),
    Mapping(P, "forward_batch_size", "ppo-sentiment", None, None,
            "a deprecated alias of mini_batch_size; not ladder's --forward-batch-size (rows per no-grad forward)"),
    Mapping(P, "target_kl", "ppo-sentiment", None, "update",
            "with early_stopping: skip the rest once KL(π_old‖π_θ) > 1.5·target_kl; core.UpdateConfig.target_kl "
            "stops after a pass instead, and ppo-sentiment has no flag for it"),
    Mapping(P, "ratio_threshold", "ppo-sentiment", None, None, "ladder skips only non-finite steps"),
    Mapping(P, "use_score_scaling", "ppo-sentiment", None, None, "ladder does not rescale scores"),
    Mapping(PT, "step", "ppo-sentiment", None, "update",
            "PPOTrainer.step(queries, responses, scores) = one ladder update: π_old, V_old, π_ref forwards → "
            "rewards → GAE → μ passes of minibatches → β update"),
    Mapping(PT, "compute_rewards", "ppo-sentiment", "kl_coef", "kl_penalized_rewards",
            "r_t = −β·KL_t + [t = last]·score"),
    Mapping(PT, "compute_advantages", "ppo-sentiment", "gae_lambda", "gae", "GAE, then Â whitened"),
    Mapping(PT, "compute_advantages", "ppo-sentiment", None, "whiten", "Â whitened over the batch's tokens"),
    Mapping(PT, "loss", "ppo-sentiment", "clip_eps", "clipped_surrogate", "policy loss"),
    Mapping(PT, "loss", "ppo-sentiment", "value_clip", "value_loss", "clipped value loss"),
    Mapping(PT, "kl_ctl", "ppo-sentiment", "adaptive_kl", "AdaptiveKLController",
            "updated after every step with the batch's mean KL"),
)
