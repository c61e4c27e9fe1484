"""The course's concept table, kept as data: where each idea is explained, practised, computed and set.

One row per concept::

    Concept(concept, notebook, section, exercise, core, flag, trl)

``notebook`` is the notebook's number as its file name starts ("1b" comes between 1 and 2) and ``section``
the exact title of one of its ``##`` headings;
``exercise`` the stem of the sheet in ``exercises/`` (None: no sheet); ``core`` the dotted path of the
function that computes it; ``flag`` a rung and one of its options, with a value where the value is the
point (``"grpo --kl-in reward"``; None: no flag); ``trl`` TRL's name for it as ``ladder.trl.map`` knows it,
a config field (``"GRPOConfig.epsilon"``) or a whole class (``"RLOOConfig"``; None: TRL has none).
``tests/test_course.py`` checks every cell against the notebooks, the exercises, the core, the rungs'
options and the TRL map, and that the README holds the table ``python -m ladder.course`` prints.

    python -m ladder.course      # the table, as Markdown
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Concept:
    concept: str
    notebook: str
    section: str
    exercise: str | None
    core: str
    flag: str | None
    trl: str | None


CONCEPTS = (
    Concept("returns-to-go $G_t$", "1", "Returns-to-go", "ex01_discounted_returns",
            "ladder.core.discounted_returns", "reinforce --gamma", None),
    Concept("REINFORCE loss $-\\hat A\\log\\pi_\\theta$", "1", "The log-derivative trick", "ex02_reinforce_loss",
            "ladder.core.pg_loss", None, None),
    Concept("baseline $b(s_t)$", "1", "A baseline", "ex04_whiten", "ladder.core.whiten", "reinforce --baseline", None),
    Concept("V, Q and the advantage $A = Q - V$", "1b", "Returns, V, Q and A", None,
            "ladder.core.discounted_returns", None, None),
    Concept("TD error $\\delta_t$; Monte-Carlo vs TD(0) vs GAE($\\lambda$)", "1b",
            "Monte-Carlo, TD(0) and GAE($\\lambda$)", None, "ladder.core.gae", "cartpole --gae-lambda",
            "PPOConfig.lam"),
    Concept("explained variance of the critic", "1b", "Monte-Carlo, TD(0) and GAE($\\lambda$)", None,
            "ladder.core.explained_variance", None, None),
    Concept("termination vs time-limit truncation", "1b", "Termination vs time-limit truncation", None,
            "ladder.core.gae", None, None),
    Concept("the surrogate $\\mathbb{E}[\\rho_t\\hat A_t]$ and its trust region", "1b",
            "The surrogate and its trust region", None, "ladder.core.clipped_surrogate", "cartpole --clip-eps", None),
    Concept("GAE", "2", "GAE", "ex03_gae", "ladder.core.gae", "cartpole --gae-lambda", "PPOConfig.lam"),
    Concept("whitening $\\hat A$", "2", "Train PPO (tiny preset)", "ex04_whiten", "ladder.core.whiten", None,
            "PPOTrainer.compute_advantages"),
    Concept("ratio $\\pi_\\theta/\\pi_{\\text{old}}$ and clipped surrogate", "2",
            "The clipped objective, on real ratios", "ex05_clipped_surrogate", "ladder.core.clipped_surrogate",
            "cartpole --clip-eps", "GRPOConfig.epsilon"),
    Concept("clip-higher $\\varepsilon_{\\text{high}}$", "2", "The clipped objective, on real ratios",
            "ex05_clipped_surrogate", "ladder.core.clipped_surrogate", "grpo --clip-eps-high",
            "GRPOConfig.epsilon_high"),
    Concept("value loss (clipped)", "2", "GAE", "ex06_value_loss", "ladder.core.value_loss",
            "ppo-sentiment --value-clip", "PPOConfig.cliprange_value"),
    Concept("the whole loss of a minibatch", "2", "From REINFORCE to PPO's surrogate", "ex17_compute_loss",
            "ladder.core.compute_loss", "cartpole --value-coef", "PPOConfig.vf_coef"),
    Concept("KL estimators k1, k2, k3", "3", "Estimating a KL from samples", "ex07_kl_estimators",
            "ladder.core.kl_estimate", "ppo-sentiment --kl-estimator", "PPOConfig.kl_penalty"),
    Concept("KL correction $\\frac{\\pi_\\theta}{\\pi_{\\text{old}}}k$", "3",
            "Why $\\pi_{\\text{old}} = \\pi_\\theta$ at sampling, and what $\\mu$ does", "ex08_kl_corrected",
            "ladder.core.kl_estimate", "grpo --kl-correction on", "GRPOConfig.use_bias_correction_kl"),
    Concept("μ passes per batch", "3", "Why $\\pi_{\\text{old}} = \\pi_\\theta$ at sampling, and what $\\mu$ does",
            "ex18_update", "ladder.core.update", "grpo --mu", "GRPOConfig.num_iterations"),
    Concept("M minibatches per pass", "3", "Why $\\pi_{\\text{old}} = \\pi_\\theta$ at sampling, and what $\\mu$ does",
            "ex18_update", "ladder.core.update", "grpo --num-minibatches", "GRPOConfig.steps_per_generation"),
    Concept("token log-probs from logits", "4", "Token log-probs: the one-position shift", "ex16_token_logp",
            "ladder.core.token_logp", "ppo-sentiment --temperature", "GRPOConfig.temperature"),
    Concept("KL in the per-token reward (RLHF)", "4", "Reward vs KL: what $\\beta$ buys", "ex09_kl_rewards",
            "ladder.core.kl_penalized_rewards", "ppo-sentiment --kl-coef", "PPOConfig.init_kl_coef"),
    Concept("adaptive β", "4", "Adaptive $\\beta$ (Ziegler et al. 2019)", None, "ladder.core.AdaptiveKLController",
            "ppo-sentiment --kl-target", "PPOConfig.target"),
    Concept("GAE over a completion's tokens", "4", "From per-token rewards to advantages: GAE over the completion",
            "ex19_masked_gae", "ladder.core.masked_gae", "ppo-sentiment --gae-lambda", "PPOConfig.lam"),
    Concept("group-relative advantages", "5", "Dropping the critic", "ex10_group_relative",
            "ladder.core.group_relative", "grpo --advantage group", "GRPOConfig.scale_rewards"),
    Concept("KL in the loss (GRPO)", "5", "KL in the loss, and how the loss is averaged", "ex08_kl_corrected",
            "ladder.core.kl_estimate", "grpo --kl-in loss", "GRPOConfig.beta"),
    Concept("aggregation", "5", "KL in the loss, and how the loss is averaged", "ex11_aggregate",
            "ladder.core.aggregate", "grpo --loss-type", "GRPOConfig.loss_type"),
    Concept("one GRPO step: sample, score, advantages, update", "5", "Run it: a few steps of the tiny preset",
            "ex20_grpo_step", "ladder.rungs.grpo.grpo_step", "grpo --group-size", "GRPOConfig.num_generations"),
    Concept("importance weight $\\pi_{\\text{old}}/\\pi_{\\text{sampler}}$ (the fourth policy), truncated or masked",
            "5", "The fourth policy: when the sampler is not π_old", "ex21_sampler_weights",
            "ladder.core.sampler_weights", "grpo --sampler-correction", "GRPOConfig.vllm_importance_sampling_mode"),
    Concept("GSPO sequence ratio $s_i$", "6", "3 · Tokens: who loses the gradient", "ex12_sequence_ratio",
            "ladder.core.sequence_log_ratio", "grpo --ratio-level sequence", "GRPOConfig.importance_sampling_level"),
    Concept("RLOO leave-one-out advantages", "6", "4 · The league", "ex13_leave_one_out",
            "ladder.core.leave_one_out", "grpo --advantage rloo", "RLOOConfig"),
    Concept("KL in the reward, one per completion (RLOO)", "6", "2 · KL in the loss: values vs gradients",
            "ex14_kl_in_reward", "ladder.core.kl_in_reward", "grpo --kl-in reward", "RLOOConfig.beta"),
    Concept("π_ref refresh", "6", "5 · The map: TRL's names → ladder's options → core functions", "ex15_soft_update",
            "ladder.core.soft_update", "grpo --ref-sync-every", "GRPOConfig.ref_model_sync_steps"),
    Concept("LUSPO's aggregation: each completion's sum, then the mean over completions", "6",
            "1 · One loss, six methods", "ex11_aggregate", "ladder.core.aggregate", "grpo --loss-type luspo",
            "GRPOConfig.loss_type"),
    Concept("SAPO's soft gate $-\\frac{4}{\\tau}\\sigma(\\tau(\\rho - 1))\\hat A$ in place of the clip", "6b",
            "1 · Objectives as functions of the ratio", "ex24_soft_gate", "ladder.core.soft_gated_surrogate",
            "grpo --loss-type sapo", "GRPOConfig.sapo_temperature_pos"),
    Concept("GDPO: each reward normalised within its group, then summed", "6b",
            "2 · Two rewards of different scales: GDPO", "ex25_decoupled_advantages",
            "ladder.core.decoupled_group_relative", "grpo --multi-objective-aggregation normalize_then_sum",
            "GRPOConfig.multi_objective_aggregation"),
    Concept("VESPO's gamma weight $\\varphi(w) = e^{\\lambda} w^{k} e^{-\\lambda w}$ of the sequence ratio", "6b",
            "1 · Objectives as functions of the ratio", None, "ladder.core.gamma_weight", "grpo --loss-type vespo",
            "GRPOConfig.vespo_k_pos"),
    Concept("the top-q entropy tokens: the policy term trains only the forks", "6b",
            "3 · The top-entropy mask on real tokens", None, "ladder.core.high_entropy_mask",
            "grpo --top-entropy-quantile", "GRPOConfig.top_entropy_quantile"),
    Concept("π_rollout: a rollout k updates stale, weighed by π_old/π_rollout", "6b",
            "4 · The fifth policy: a rollout k updates stale", None, "ladder.core.sampler_weights",
            "grpo --max-staleness", None),
    Concept("a trajectory's two masks: the environment's tokens read (attention), not trained on (mask)", "7",
            "1 · One trajectory, two masks", "ex22_trajectory_tensors", "ladder.rungs.agent.rollout.trajectory_tensors",
            "agent --train-env-tokens", "GRPOTrainer.environment_factory"),
    Concept("the multi-turn rollout on one cache: tool calls, their replies, the budget", "7",
            "2 · The rollout: turn after turn, on one cache", "ex23_multi_turn",
            "ladder.rungs.agent.rollout.multi_turn", "agent --max-tool-calls",
            "GRPOConfig.max_tool_calling_iterations"),
    Concept("the environment's tokens trained on as the model's (the mistake, measured)", "7",
            "3 · The environment's tokens in the loss", None, "ladder.rungs.agent.sample_trajectories",
            "agent --train-env-tokens", None),
    Concept("per-turn credit $\\hat A_{i,k} = \\sum_{j \\ge k} \\tilde r_{i,j}$ (process supervision)", "7",
            "4 · Per-trajectory vs per-turn credit", None, "ladder.core.group_relative_turns", "agent --credit turn",
            None),
    Concept("the environment protocol: reset, tools as methods, get_reward", "7",
            "5 · The environment protocol, and where each idea lives", None, "ladder.rungs.agent.environment",
            "agent --env", "GRPOTrainer.environment_factory"),
    Concept("the loss ≈ 0 and the clip fraction 0 at $\\mu \\cdot M = 1$: harmless, the gradient is not 0", "8",
            "1 · Reading a run: the clean bill and two harmless notes", None, "ladder.core.clipped_surrogate",
            "grpo --mu", "GRPOConfig.num_iterations"),
    Concept("zero-spread groups ($\\hat A = 0$, no gradient): completions cut off at the token budget", "8",
            "3 · The token budget: where the signal starves", None, "ladder.core.group_relative",
            "grpo --max-new-tokens", "GRPOConfig.max_completion_length"),
    Concept("Bradley–Terry: a reward model from pairs, $-\\log\\sigma(r_\\phi(x, y_w) - r_\\phi(x, y_l))$", "9",
            "1 · From preferences to a reward: Bradley–Terry", "ex26_bradley_terry", "ladder.core.bradley_terry_loss",
            "reward-model --dataset", "RewardConfig"),
    Concept("reward over-optimisation: the learned reward up, the true one down as the KL grows", "9",
            "3 · Over-optimisation: the proxy rises, the truth falls", None, "ladder.core.kl_penalized_rewards",
            "ppo-sentiment --reward-model", None),
    Concept("DPO: $-\\log\\sigma(\\beta[\\log\\frac{\\pi_\\theta}{\\pi_{ref}}(y_w) "
            "- \\log\\frac{\\pi_\\theta}{\\pi_{ref}}(y_l)])$, "
            "the reward read off the policy", "9", "4 · DPO: the reward was in the policy all along", "ex27_dpo_loss",
            "ladder.core.dpo_loss", "dpo --beta", "DPOConfig.beta"),
    Concept("on-policy distillation: the teacher's reward on every sampled token, "
            "$r_t = -(\\log\\pi_\\theta - \\log\\pi_{teacher})(y_t)$, k1 of the reverse KL", "10",
            "1 · The teacher's reward on every token", "ex28_distillation_rewards",
            "ladder.core.distillation_rewards", "distill --discount", "GKDConfig.beta"),
    Concept("GKD's generalized JSD $\\beta\\,\\mathrm{KL}(p \\Vert m) + (1-\\beta)\\,\\mathrm{KL}(q \\Vert m)$: "
            "the forward KL at $\\beta = 0$, the reverse at $\\beta = 1$", "10",
            "2 · Forward, reverse and between: the generalized JSD", "ex29_generalized_jsd",
            "ladder.core.generalized_jsd", None, "GKDConfig.beta"),
)


def section_of(exercise: str) -> tuple[str, str]:
    """(notebook, section) an exercise goes with: the first row that names it."""
    return next((c.notebook, c.section) for c in CONCEPTS if c.exercise == exercise)


def sheet_line(exercise: str) -> str:
    """The line each exercise sheet carries under its title."""
    notebook, section = section_of(exercise)
    return f"Goes with notebook {notebook}, section “{section}”."


def _code(text: str | None) -> str:
    return "—" if text is None else f"`{text}`"


def markdown(concepts: tuple[Concept, ...] = CONCEPTS) -> str:
    """The concept table as Markdown (what the README holds)."""
    lines = ["| concept | notebook | section | exercise | core | flag | TRL |", "|---|---|---|---|---|---|---|"]
    for c in concepts:
        lines.append(f"| {c.concept} | {c.notebook} | {c.section} | {_code(c.exercise)} | "
                     f"{_code(c.core.removeprefix('ladder.'))} | {_code(c.flag)} | {_code(c.trl)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
