"""Rung 3: RLHF-PPO — make a causal LM continue movie reviews positively, with a KL-shaped reward.

Each update, on the same ``ladder.core`` as CartPole:

    prompts (2–8 tokens, left-padded) → sample completions from π_θ (= π_old)
    score_b       = reward_model(prompt_b + completion_b)                   one number per completion
    r_t           = −β·KL_t(π_old ‖ π_ref) + [t = last] · score             core.kl_penalized_rewards
    Â_t, R_t      = GAE(r, V_old; γ, λ) over completion tokens, Â whitened  core.masked_gae, core.whiten
    μ passes × minibatches of clipped surrogate + clipped value loss      core.update
    β             ← adaptive controller on the mean per-sequence KL         core.AdaptiveKLController

π_ref is a frozen copy of the starting model, or with ``--lora``/``--qlora`` the same weights with the adapter
disabled. ``--preset tiny`` runs offline on a CPU in minutes: a tiny GPT-2 trained here on generated
reviews, bundled review openings as prompts, VADER as the reward model.

metrics.jsonl, one line per update: score_mean/std (the reward model's score), reward_mean/std
(score − β·Σ_t KL_t per completion: what PPO maximises), non_score_reward_mean, kl_ref (mean
per-sequence Σ_t KL_t, what the controller sees), kl_coef (the β of this batch), clip fractions,
approx KL to π_old, value loss, explained variance, entropy, response_length. summary.json adds the
first/last scores, the final KL and the before/after samples (also in samples.md).
"""

# The package: the recipe the loop runs (``SentimentPPO``: each update ``ppo_step``), ``train``, summary.json and the
# declaration ``RUNG`` (``recipe``); the options, the ``core.UpdateConfig`` and the KL controller they make
# (``options``); one batch of experience, sampled, scored, with log π_old, V_old and log π_ref and the KL-shaped
# rewards and GAE targets (``experience``: ``rollout``, ``score``, ``old_and_ref``, ``ppo_targets``); what a run loads
# and saves (``setup``: ``load_model``, ``load_parts``, ``build_policy``, ``save_policy``); and the before/after table
# of fixed prompts (``samples``).

from ladder.rungs.ppo_sentiment.experience import old_and_ref, ppo_targets, rollout, score
from ladder.rungs.ppo_sentiment.options import (
    ALGOS,
    PRESETS,
    RESOLVED,
    Config,
    kl_controller,
    update_config,
    validate,
)
from ladder.rungs.ppo_sentiment.recipe import CURVES, NAME, RUNG, SentimentPPO, build, summarize, train
from ladder.rungs.ppo_sentiment.samples import before_after_table, sample_table
from ladder.rungs.ppo_sentiment.setup import build_policy, load_model, load_parts, save_policy

__all__ = [
    "ALGOS", "CURVES", "NAME", "PRESETS", "RESOLVED", "RUNG", "Config", "SentimentPPO", "before_after_table", "build",
    "build_policy", "kl_controller", "load_model", "load_parts", "old_and_ref", "ppo_targets", "rollout",
    "sample_table", "save_policy", "score", "summarize", "train", "update_config", "validate",
]
