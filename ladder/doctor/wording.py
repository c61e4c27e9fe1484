"""What the doctor says about each signature: its title, whether it is a problem, what it means, what to change in
ladder and in TRL, and the notebook section that explains it (``signatures.py`` decides when each applies).

``WORDING`` holds one ``Wording`` per signature; a rung declares the words of a signature that means something else on
it (``Rung.words``: a KL blow-up in RLHF PPO has no groups to make alike); ``wording(name, rung)`` picks."""

from __future__ import annotations

from ladder.rungs import registry
from ladder.rungs.protocol import Words as Wording

NB3 = "notebooks/3_three_policies_and_kl.ipynb"
NB5 = "notebooks/5_grpo_qlora.ipynb"
NB6 = "notebooks/6_design_space_and_trl.ipynb"
NB4 = "notebooks/4_ppo_rlhf_sentiment.ipynb"
NB9 = "notebooks/9_where_the_reward_comes_from.ipynb"
DPO_FAILURES = (NB9, "## 5 · DPO's own failure modes: the likelihood it loses, the length it gains")
WORDING = {
    "loss_zero": Wording(
        "loss ≈ 0 at μ·M = 1", "harmless",
        "with one optimiser step per batch π_old = π_θ, the ratio is 1 and the loss is the mean advantage plus β·KL "
        "(the mean of group-centred Â is 0 over each group's completions; averaged over tokens, as dapo, bnpo and "
        "dr_grpo do, it is a length-weighted mean, small when lengths are alike); its gradient is not zero — look at "
        "grad_norm and the reward, not the loss",
        "nothing (--mu > 1 or --num-minibatches > 1 makes the ratio move)", "nothing (num_iterations, "
        "steps_per_generation)", (NB3, r"## Why $\pi_{\text{old}} = \pi_\theta$ at sampling, and what $\mu$ does")),
    "clip_zero": Wording(
        "clip fraction always 0 at μ·M = 1", "harmless",
        "the ratio π_θ/π_old is 1 (to float32 rounding) at the only step on each batch, well inside "
        "[1 − ε, 1 + ε], so nothing can be clipped",
        "nothing (the clip acts only with --mu > 1 or --num-minibatches > 1)", "nothing (num_iterations > 1)",
        (NB3, r"## Why $\pi_{\text{old}} = \pi_\theta$ at sampling, and what $\mu$ does")),
    "truncation": Wording(
        "truncation starves the signal", "problem",
        "completions cut off at the token budget get the same (usually zero) reward, whole groups alike: Â = 0, "
        "no gradient from them",
        "raise --max-new-tokens, or --mask-truncated / --overlong-buffer", "raise max_completion_length, or "
        "mask_truncated_completions=True", ("notebooks/8_run_doctor.ipynb",
                                            "## 3 · The token budget: where the signal starves")),
    "no_signal": Wording(
        "groups that teach nothing", "problem",
        "a group whose rewards are all equal has Â = 0 and adds no gradient; {why}",
        "--dynamic-sampling, a larger --group-size, or data of the right difficulty", "num_generations larger, or "
        "filter the dataset (GRPOTrainer has no dynamic sampling)", (NB5, "## Run it: a few steps of the tiny preset")),
    "entropy_collapse": Wording(
        "entropy collapse", "problem",
        "the policy is near-deterministic: the same actions every time (for an LM, groups alike), no exploration left",
        "lower --lr; grpo: --kl-coef up, --clip-eps-high 0.28 or --adaptive-entropy; cartpole: --entropy-coef 0.01",
        "lower learning_rate, raise beta, epsilon_high=0.28 or use_adaptive_entropy",
        (NB6, "## 3 · Tokens: who loses the gradient")),
    "kl_blowup": Wording(
        "KL to π_ref blowing up", "problem",
        "the policy is running away from π_ref (KL per token): steps too large for the data; its completions collapse "
        "to the same few (groups alike, no signal) and reward hacking follows",
        "lower --lr, raise --kl-coef, lower --max-grad-norm", "lower learning_rate, raise beta, lower max_grad_norm",
        (NB5, "## KL in the loss, and how the loss is averaged")),
    "length_drift": Wording(
        "length drift under the per-sequence mean", "problem",
        "the per-sequence mean gives each token of a long completion less weight, so long wrong answers are "
        "punished less than short ones: length grows while the reward does not",
        "--loss-type dr_grpo (or dapo)", "loss_type='dr_grpo' (or 'dapo')", (NB6, "### What the constant counts")),
    "reward_overoptimised": Wording(
        "the learned reward over-optimised", "problem",
        "the learned reward ({proxy}) keeps rising while the true reward it was fitted to stand for has peaked and is "
        "falling: the policy has found what the learned reward overrates (Gao et al. 2022); past this KL to π_ref, "
        "more optimisation is worse",
        "raise --kl-coef (ppo-sentiment, with --no-adaptive-kl) or --beta (dpo), or stop near the peak (fewer "
        "--steps); a reward model from pairs without the bias", "raise kl_coef (PPO) or beta (DPO), or fewer max_steps",
        (NB9, "## 3 · Over-optimisation: the proxy rises, the truth falls")),
    "format_hacking": Wording(
        "reward rising while correctness does not", "problem",
        "the policy is learning an easier reward (format, say) and not the task; the total reward hides it",
        "--reward-weights with more weight on correctness, or a stricter format reward",
        "reward_weights", (NB5, "## Rule rewards")),
    "nothing_moving": Wording(
        "nothing moving", "problem",
        "the reward is flat and the policy has not left π_ref: the learning rate is too low{lora}",
        "raise --lr (LoRA: ~1e-4–1e-3)", "raise learning_rate (with a peft_config: ~1e-4–1e-3)",
        (NB5, "## Memory: 4-bit + LoRA + the disabled adapter")),
    "nonfinite": Wording(
        "non-finite steps", "problem",
        "a loss or gradient overflowed (NaN/inf); ladder skipped those steps, TRL applies them",
        "check the rewards' scale and NaNs first (huge rewards with --scale-rewards none overflow the gradient before "
        "any clipping), then lower --lr", "scale_rewards, the reward functions, learning_rate",
        ("README.md", "## Every run")),
    "sampler_mismatch": Wording(
        "a sampler mismatch the correction no longer covers", "problem",
        "π_sampler (a lower precision, or π_rollout some updates stale) and π_old disagree so much that the "
        "importance weights are cut back on many tokens, or go uncorrected: the gradient is no longer the on-policy "
        "one",
        "--sampler-correction token_truncate (or sequence_mask with --sampler-clip-max), then --sampler-dtype same "
        "or a smaller --max-staleness",
        "vllm_importance_sampling_mode / vllm_importance_sampling_cap, match vLLM's dtype, or fewer async steps",
        (NB5, "## The fourth policy: when the sampler is not π_old")),
    "critic_not_learning": Wording(
        "critic not learning", "problem",
        "the value head {how}: GAE's baseline is noise, the advantages too{cause}",
        "raise --value-coef (0 trains no critic); if the policy diverged too (entropy, KL), lower --lr first",
        "vf_coef (classic PPOConfig), learning_rate",
        ("notebooks/1b_foundations.ipynb", "### Explained variance")),
    "clip_too_high": Wording(
        "clip fraction too high", "problem",
        "a large share of the actions (an LM's tokens) has its ratio π_θ/π_old pushed out of [1 − ε, 1 + ε]: the "
        "update is leaving the trust region; the run may still learn, but it is fragile",
        "lower --mu or --lr (or fewer --num-minibatches)", "lower num_iterations or learning_rate",
        ("notebooks/2_ppo_cartpole.ipynb", "## The clipped objective, on real ratios")),
    "likelihood_displacement": Wording(
        "likelihood displacement: the chosen made less likely", "problem",
        "DPO widens the margin β·[log π_θ/π_ref (y_w) − log π_θ/π_ref (y_l)] by pushing both completions down, the "
        "rejected faster: the loss sees only the difference, so nothing in it holds log π_θ(y_w) up, and the "
        "probability both lose goes to completions no pair shows, good or bad (Razin et al. 2024, likelihood "
        "displacement; Pal et al. 2024, DPOP)",
        "lower --lr or fewer --steps, a larger --beta (it holds π_θ nearer π_ref); ladder's dpo has no term on the "
        "chosen: for RPO or DPOP use TRL",
        "lower learning_rate, larger beta; RPO: loss_type=['sigmoid', 'sft'] with loss_weights (an NLL term on the "
        "chosen; older TRL: rpo_alpha), or loss_type='apo_zero' (it pushes the chosen up)",
        DPO_FAILURES),
    "nothing_to_teach": Wording(
        "a teacher with nothing to teach", "problem",
        "the teacher gives the student's own tokens the student's own log-probs: every per-token reward "
        "r_t = −(log π_θ − log π_teacher)(y_t) is ≈ 0, and so is the Â they sum to: no gradient from the teacher, "
        "the student stays where it began and its accuracy with it; the teacher is the student (a copy of its "
        "weights, or the same model under another name or path)",
        "--teacher a stronger model with the student's tokenizer (the tiny preset's: @tiny-math-teacher), not a copy "
        "of --model", "GKDTrainer's teacher_model (GKDConfig's teacher_model_name_or_path): a stronger model "
        "than the student, with its vocabulary",
        ("notebooks/10_learning_from_a_teacher.ipynb", "## 1 · The teacher's reward on every token")),
}

def wording(name: str, rung: str | None = None) -> Wording:
    """The words of signature ``name`` on a run of ``rung``: its rung's own where it declares them
    (``Rung.words``), else the common ones."""
    known = registry.rungs()
    own = known[rung].RUNG.words if rung in known else {}
    return own.get(name, WORDING[name])
