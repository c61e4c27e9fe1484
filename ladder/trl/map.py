"""TRL's names → ladder's options → the ``ladder.core`` function that computes them, kept as data.

One row per (TRL name, ladder option) pair::

    Mapping(trl_class, trl_field, ladder_rung, ladder_option, core_function, note, value, applies)

``trl_class`` is a TRL config (``GRPOConfig``, ``RLOOConfig``; ``PPOConfig`` is the *classic* one of
the RLHF articles, TRL ≤ 0.11, which TRL 1.16 no longer ships, not even under ``trl.experimental``),
a trainer's argument (``GRPOTrainer``: ``__init__``'s parameters; ``GRPOTrainer.train``), the classic
``PPOTrainer``'s methods, or the module ``trl.rewards``. ``trl_field`` None: the ladder option has no
TRL equivalent (the note says what to do instead). ``ladder_option`` None: a TRL setting with no
ladder flag (the note says what ladder does). ``core_function`` names an attribute of ``ladder.core``.

``value(cfg)`` (GRPOConfig rows only) is the TRL value that reproduces a grpo ``Config``;
``ladder.trl.export`` builds its ``GRPOConfig`` from these rows and nothing else. ``applies(cfg)``
says whether a row concerns this run (None: always): a conditional mapping (``epsilon_high`` is
``clip_eps_high``, or ``cispo_max_weight`` with ``--loss-type cispo``), or for a row without a TRL
field, whether the run really uses the option TRL cannot reproduce.

    >>> from ladder import trl_map
    >>> [r.ladder_option for r in trl_map.for_field("GRPOConfig", "num_iterations")]
    ['mu']
    >>> [r.trl_field for r in trl_map.for_option("kl_coef", rung="ppo-sentiment") if r.trl_class == "PPOConfig"]
    ['init_kl_coef']
"""

from __future__ import annotations

from typing import Any

from ladder import core
from ladder.rungs import lm_options
from ladder.rungs.grpo import advantage_spec, kl_to_ref, loss_types, reference_refresh, sampler, scoring
from ladder.trl.map_design import DESIGN_ROWS
from ladder.trl.map_ppo import PPO_ROWS, RLOO_ROWS
from ladder.trl.map_preferences import PREFERENCE_ROWS
from ladder.trl_rows import (
    CLASSIC,
    CLASSIC_PPO_CONFIG_FIELDS,
    Mapping,
    agent,
    const,
    on_cuda,
    optim,
    optimizer_steps,
    peft,
    same,
)

__all__ = ["CLASSIC", "CLASSIC_PPO_CONFIG_FIELDS", "Mapping", "optimizer_steps", "all_rows", "SCHEDULE", "rows",
           "trl_classes", "for_field", "for_option", "ladder_options", "not_in_trl", "trl_values"]

SCHEDULE = ("ladder: each update samples P·G completions and makes μ passes over them, each pass a fresh "
            "shuffle into M minibatches, one optimiser step each. TRL: a generation batch of "
            "per_device_train_batch_size × steps_per_generation × processes completions is shuffled once "
            "and cut into steps_per_generation micro-batches, reused in the same order for num_iterations "
            "passes; one optimiser step per gradient_accumulation_steps micro-batches. With "
            "gradient_accumulation_steps = 1, steps_per_generation = M, per_device_train_batch_size = P·G/M "
            "every TRL step sees one ladder minibatch; only the reshuffle between passes differs (none for μ = 1)")

G = "GRPOConfig"
GT = "GRPOTrainer"
NONE = None  # no TRL equivalent

# --- GRPO: GRPOConfig, GRPOTrainer's arguments, and the grpo options TRL has no name for -------------

GRPO_ROWS = (
    # batch and schedule
    Mapping(G, "num_generations", "grpo", "group_size", "group_relative", "G completions per prompt",
            same("group_size")),
    Mapping(G, "per_device_train_batch_size", "grpo", "prompts_per_step", "update",
            "P·G/M completions per optimiser step (ladder's --prompts-per-step × --group-size ÷ --num-minibatches); "
            "ladder's P is the total over all processes, TRL's batch is per device: the script divides by WORLD_SIZE",
            lambda cfg: cfg.prompts_per_step * cfg.group_size // cfg.num_minibatches),
    Mapping(G, "gradient_accumulation_steps", "grpo", None, "update",
            "1: ladder takes one optimiser step per minibatch and accumulates nothing", const(1)),
    Mapping(G, "steps_per_generation", "grpo", "num_minibatches", "update", SCHEDULE, same("num_minibatches")),
    Mapping(G, "num_iterations", "grpo", "mu", "update",
            "μ passes over each generation batch (TRL keeps the micro-batches of the first pass; ladder reshuffles)",
            same("mu")),
    Mapping(G, "max_steps", "grpo", "steps", None,
            "TRL counts optimiser steps: --steps × μ × M (one ladder update = one generation batch)",
            lambda cfg: optimizer_steps(cfg, cfg.steps)),
    Mapping(G, "num_train_epochs", "grpo", "steps", None,
            "not set: max_steps > 0 overrides epochs (ladder reshuffles the problems whenever it runs out)"),
    # the loss
    kl_to_ref.TRL_ROWS["beta"],
    Mapping(G, "epsilon", "grpo", "clip_eps", "clipped_surrogate", "ratio clipped below at 1 − ε",
            same("clip_eps")),
    Mapping(G, "epsilon_high", "grpo", "clip_eps_high", "clipped_surrogate", "ratio clipped above at 1 + ε_high",
            same("clip_eps_high"), lambda cfg: not isinstance(cfg.objective, core.CISPO)),
    *loss_types.trl_rows(core.CISPO, core.Clipped),  # the objectives' own flags (loss_types)
    # the fourth policy: π_sampler ≠ π_old (TRL's sampler is vLLM; ladder's, the weights rounded)
    *sampler.TRL_ROWS,  # π_sampler's flags (sampler)
    Mapping(G, "loss_type", "grpo", "loss_type", "aggregate",
            "grpo | bnpo | dr_grpo | dapo | cispo | sapo | luspo | vespo, the same names (TRL's default is dapo, "
            "ladder's grpo)",
            same("loss_type"), loss_types.in_trl),
    *advantage_spec.trl_rows(),  # --scale-rewards, sum_then_normalize's (advantages)
    Mapping(G, "importance_sampling_level", "grpo", "ratio_level", "sequence_log_ratio",
            "token (GRPO) | sequence (GSPO)", same("ratio_level")),
    kl_to_ref.TRL_ROWS["use_bias_correction_kl"],
    Mapping(G, "sync_ref_model", "grpo", "ref_sync_every", "soft_update",
            "TRL 1.16 refuses sync_ref_model with a PEFT model (ladder refreshes a second, frozen adapter): "
            "with --lora/--qlora the export leaves π_ref fixed",
            lambda cfg: cfg.reference_refresh is not None and not peft(cfg)),
    Mapping(G, "ref_model_sync_steps", "grpo", "ref_sync_every", "soft_update",
            "TRL counts optimiser steps: --ref-sync-every × μ × M",
            lambda cfg: optimizer_steps(cfg, cfg.reference_refresh.every),
            lambda cfg: cfg.reference_refresh is not None),
    *reference_refresh.TRL_ROWS,
    Mapping(G, "mask_truncated_completions", "grpo", "mask_truncated", None,
            "completions cut at the length limit take no part in the loss (ladder: grpo_rollout)",
            same("mask_truncated")),
    scoring.TRL_ROWS["reward_weights"],
    # sampling
    Mapping(G, "max_completion_length", "grpo", "max_new_tokens", "aggregate",
            "completion length limit (and dr_grpo's constant L_max); 512 by default in both",
            same("max_new_tokens")),
    Mapping(G, "generation_kwargs", "grpo", "min_new_tokens", None, "EOS suppressed until min_new_tokens",
            lambda cfg: {"min_new_tokens": cfg.generation.min_new_tokens},
            lambda cfg: cfg.generation.min_new_tokens > 0),
    Mapping(G, "temperature", "grpo", "temperature", None, "sampling τ; log-probs use the same τ in both",
            same("temperature")),
    Mapping(G, "top_p", "grpo", "top_p", None, "nucleus sampling. ladder's π_sampler is the distribution drawn from, "
            "the cut renormalised, so π_old/π_sampler is the kept mass; TRL's vLLM log-probs are the uncut ones "
            "(trl#6789)", same("top_p")),
    # optimiser
    Mapping(G, "learning_rate", "grpo", "lr", None, "", same("lr")),
    Mapping(G, "lr_scheduler_type", "grpo", "warmup_steps", None,
            "ladder keeps the rate constant after the warmup; TRL's default decays it linearly to 0",
            lambda cfg: "constant_with_warmup" if cfg.optimisation.warmup_steps else "constant"),
    Mapping(G, "warmup_steps", "grpo", "warmup_steps", None,
            "× μ × M optimiser steps; TRL's first step has rate 0, ladder's lr/N",
            lambda cfg: optimizer_steps(cfg, cfg.optimisation.warmup_steps)),
    Mapping(G, "max_grad_norm", "grpo", "max_grad_norm", "update", "gradient-norm clip per optimiser step",
            same("max_grad_norm")),
    Mapping(G, "optim", "grpo", "optim", None,
            "auto: paged_adamw_8bit with --qlora on CUDA, else AdamW (weight decay 0 in both)", optim),
    Mapping(G, "gradient_checkpointing", "grpo", "gradient_checkpointing", None,
            "default: on with --qlora (TRL's default: on)",
            lm_options.gradient_checkpointing),
    Mapping(G, "disable_dropout", "grpo", None, None, "ladder always turns dropout off in the policy",
            const(True)),
    # where and how it runs
    Mapping(G, "use_cpu", "grpo", "device", None, "the script's --device overrides it",
            lambda cfg: cfg.device == "cpu"),
    Mapping(G, "bf16", "grpo", "device", None,
            "ladder computes in bfloat16 on a CUDA GPU that has it, float32 on the CPU (TRL's default: bf16 on)",
            on_cuda),
    Mapping(G, "model_init_kwargs", "grpo", "device", None, "the dtype the model loads in",
            lambda cfg: {"dtype": "bfloat16" if on_cuda(cfg) else "float32"}),
    Mapping(G, "seed", "grpo", "seed", None, "", same("seed")),
    Mapping(G, "output_dir", "grpo", "out", None,
            "OUT-trl (the adapter or model is saved there; the script's --output-dir overrides it)",
            lambda cfg: (cfg.out or f"runs/{'agent' if agent(cfg) else 'grpo'}-seed{cfg.seed}") + "-trl"),
    Mapping(G, "save_steps", "grpo", "checkpoint_every", None, "× μ × M optimiser steps",
            lambda cfg: optimizer_steps(cfg, cfg.checkpoint_every)),
    Mapping(G, "save_total_limit", "grpo", "checkpoint_every", None, "ladder keeps only the latest checkpoint",
            const(1)),
    Mapping(G, "report_to", "grpo", "report_to", None, "the same trackers (TRL's TensorBoard logs go under output_dir)",
            lambda cfg: [cfg.report_to] if cfg.report_to != "none" else "none"),
    Mapping(G, "logging_steps", "grpo", None, None, "ladder logs every update", const(1)),
    Mapping(G, "disable_tqdm", "grpo", "progress", None, "", lambda cfg: not cfg.progress),
    Mapping(G, "log_completions", "grpo", "print_samples", None,
            "not set: TRL logs a table of completions every logging step; ladder every N updates "
            "(OUT/completions.jsonl)"),
    Mapping(G, "eval_steps", "grpo", "eval_every", None,
            "not set: TRL's evaluation samples and scores completions; ladder's is greedy held-out accuracy "
            "(run `python -m ladder.run eval --adapter OUTPUT_DIR`)"),
    # GRPOTrainer's arguments: written out as code by the export
    Mapping(GT, "model", "grpo", "model", None,
            "a hub id or a local directory; @tiny-math is ladder's cached tiny model "
            "(math_problems.resolve_math_model)"),
    Mapping(GT, "train_dataset", "grpo", "task", None,
            "the training problems of ladder.tasks.math_problems.split, the grpo rung's: gsm8k's train split, or "
            "the synthetic sums not held out"),
    Mapping(GT, "train_dataset", "grpo", "dataset", None,
            "a hub id, or a local .json/.jsonl (one split: its tail held out, as ladder does)"),
    Mapping(GT, "train_dataset", "grpo", "system_prompt", None, "chat messages: system, then the question"),
    Mapping(GT, "train_dataset", "grpo", "train_size", None, "the first N training problems"),
    Mapping(GT, "train_dataset", "grpo", "eval_size", None,
            "arithmetic: the first N sums are held out; a local file: min(N, rows/5) of its tail"),
    *scoring.TRAINER_ROWS,
    Mapping(GT, "quantization_config", "grpo", "qlora", None,
            "BitsAndBytesConfig: 4-bit nf4, double quantisation, compute dtype bf16 (CUDA) / float32 (CPU)"),
    Mapping(GT, "peft_config", "grpo", "qlora", None, "LoRA on every linear layer"),
    Mapping(GT, "peft_config", "grpo", "lora", None, "LoraConfig(target_modules='all-linear', dropout 0)"),
    Mapping(GT, "peft_config", "grpo", "lora_r", None, "LoraConfig.r"),
    Mapping(GT, "peft_config", "grpo", "lora_alpha", None, "LoraConfig.lora_alpha"),
    Mapping("GRPOTrainer.train", "resume_from_checkpoint", "grpo", "resume", None,
            "TRL resumes its own checkpoints (output_dir/checkpoint-N), not ladder's run directories"),
    # no TRL equivalent
    Mapping(G, NONE, "grpo", "advantage", "leave_one_out",
            "GRPOTrainer has no leave-one-out advantage; with the same --scale-rewards none it is the group "
            "advantage × G/(G−1), i.e. a learning rate × G/(G−1) (batch: whitened the same way). "
            "TRL's RLOOTrainer has it", applies=lambda cfg: advantage_spec.estimator(cfg) == "rloo"),
    *kl_to_ref.NOT_IN_TRL,
    Mapping(G, NONE, "grpo", "dynamic_sampling", None,
            "DAPO's dynamic sampling (drop groups without a reward spread, sample more prompts): not in "
            "GRPOTrainer; its frac_reward_zero_std metric counts those groups",
            applies=lambda cfg: cfg.dynamic_sampling is not None),
    Mapping(G, NONE, "grpo", "max_sampling_rounds", None, "dynamic sampling's budget",
            applies=lambda cfg: cfg.dynamic_sampling is not None),
    Mapping(G, NONE, "grpo", "max_completions", None, "a budget of sampled completions: use max_steps",
            applies=lambda cfg: cfg.max_completions > 0),
    Mapping(G, NONE, "grpo", "chunk_size", None, "ladder's chunked lm_head/log-softmax: memory only"),
    Mapping(G, NONE, "grpo", "sampler_loop", None, "TRL samples with transformers' generate (without vLLM); "
            "ladder's own decode loop draws from the same distribution: speed only"),
    Mapping(G, NONE, "grpo", "dequantize_once", None, "ladder's 4-bit sampling on the CPU: speed only",
            applies=lambda cfg: cfg.adapter.qlora),
    Mapping(G, NONE, "grpo", "release_memory", None,
            "ladder's glibc mmap threshold: memory only (for TRL: MALLOC_MMAP_THRESHOLD_=131072 in the environment)",
            applies=lambda cfg: cfg.adapter.qlora),
    Mapping(G, NONE, "grpo", "threads", None, "the script calls torch.set_num_threads itself",
            applies=lambda cfg: cfg.threads > 0),
    Mapping(G, NONE, "grpo", "print_samples", None, "see log_completions"),
    Mapping(G, NONE, "grpo", "eval_every", None, "see eval_steps"),
    Mapping(G, NONE, "grpo", "overwrite", None, "TRL writes into output_dir as it is"),
    Mapping(G, NONE, "grpo", "max_nonfinite_updates", None,
            "ladder skips (and counts) non-finite steps and stops after N in a row; TRL steps anyway"),
    Mapping(G, NONE, "grpo", "reward_timeout", None,
            "TRL puts no time limit on a reward function's call (one that hangs holds the training); the script's "
            "reward functions run without one"),
    Mapping(G, NONE, "grpo", "use_exercises", None, "TRL computes the loss with its own code"),
    Mapping(G, NONE, "grpo", "export_trl", None, "the switch that writes this script"),
)

# --- agents: GRPOTrainer(environment_factory=…) ↔ the agent rung (every grpo row above applies to it too) -----

AGENT_ROWS = (
    Mapping(GT, "environment_factory", "agent", "env", None,
            "the environment class itself: TRL makes one instance per trajectory and calls reset(**row) with the "
            "dataset row (the problem's fields and the prompt); built-ins are ladder.tasks.agent_envs' classes, "
            "a FILE.py:Class is loaded by the script"),
    Mapping(G, "max_tool_calling_iterations", "agent", "max_tool_calls", None,
            "both count the turns that call tools (TRL's rounds of its tool loop: all the calls of one turn in one "
            "round), not the calls; past the limit TRL ends the trajectory, the turn's calls unanswered, while "
            "ladder answers each of them with an error the model reads (a tool failure) and lets it answer",
            same("max_tool_calls"), agent),
    Mapping(G, "max_completion_length", "agent", "max_new_tokens", "aggregate",
            "the token budget of the whole trajectory, the tools' replies included; a reply that would not fit "
            "ends the trajectory in both"),
    Mapping(GT, "environment_factory", "agent", None, "aggregate",
            "the loss mask: TRL's tool_mask (its tool loop; a rollout_func returns it as env_mask) is 1 on the "
            "model's tokens and 0 on the tools' replies, ladder's Trajectories.mask; both attend to every token "
            "(ladder's Trajectories.attention_mask)"),
    Mapping(G, NONE, "agent", "train_env_tokens", "aggregate",
            "TRL always keeps the tools' tokens out of the loss (tool_mask); ladder's --train-env-tokens, the "
            "mistake made to be seen, has no TRL switch: the script trains as without it",
            applies=lambda cfg: cfg.train_env_tokens),
    Mapping(G, NONE, "agent", "credit", "group_relative_turns",
            "GRPOTrainer gives every model token its trajectory's advantage (--credit trajectory); --credit turn "
            "(turn_rewards, per-turn advantages) is not in TRL: the script trains with the trajectory's",
            applies=lambda cfg: cfg.credit == "turn"),
    Mapping(G, NONE, "agent", "env_timeout", None,
            "TRL puts no time limit on the environment's calls (a tool or reset that hangs holds the training); "
            "the script's environment runs without one"),
    Mapping(GT, "reward_funcs", "agent", "reward_funcs", None,
            "TRL passes a trajectory as its messages (the model's turns, the tools' replies): the script's rewards "
            "read the last assistant message, as ladder's read the last model turn; an environment's get_reward "
            "is added by both, weight 1, logged under the class's name"),
)

BUILT_IN = (core.CISPO, core.Clipped, core.SoftGate, core.GammaWeighted)  # placed above and in DESIGN_ROWS


def all_rows() -> tuple[Mapping, ...]:
    """Every row: the ones above, and those of any objective registered since (``loss_types``), after the
    design space's."""
    added = tuple(spec for spec in loss_types.PARAMS if spec not in BUILT_IN)
    extra = loss_types.trl_rows(*added) if added else ()
    if not all(t.in_trl for t in loss_types.LOSS_TYPES.values()):
        extra += (Mapping(G, NONE, "grpo", "loss_type", None, "a loss type GRPOTrainer does not have: the script "
                          "leaves GRPOConfig.loss_type at TRL's default",
                          applies=lambda cfg: not loss_types.in_trl(cfg)),)
    return GRPO_ROWS + DESIGN_ROWS + extra + AGENT_ROWS + RLOO_ROWS + PPO_ROWS + PREFERENCE_ROWS


def __getattr__(name: str):
    if name == "ROWS":  # read when asked: an objective registered after this module loaded has its rows in it
        return all_rows()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- lookups ---------------------------------------------------------------------------------------

def rows(trl_class: str) -> tuple[Mapping, ...]:
    """The rows of one TRL class (``"GRPOConfig"``, ``"RLOOConfig"``, ``"PPOConfig"``, ``"GRPOTrainer"``, …)."""
    return tuple(r for r in all_rows() if r.trl_class == trl_class)


def trl_classes() -> tuple[str, ...]:
    return tuple(dict.fromkeys(r.trl_class for r in all_rows()))


def for_field(trl_class: str, trl_field: str) -> tuple[Mapping, ...]:
    """The rows of one TRL name (several when it maps several ladder options, or depends on one)."""
    return tuple(r for r in all_rows() if r.trl_class == trl_class and r.trl_field == trl_field)


def for_option(option: str, rung: str = "grpo") -> tuple[Mapping, ...]:
    """The rows of one ladder option of ``rung``."""
    return tuple(r for r in all_rows() if r.ladder_rung == rung and r.ladder_option == option)


def ladder_options(rung: str) -> set[str]:
    """Every ladder option the map mentions for ``rung``."""
    return {r.ladder_option for r in all_rows() if r.ladder_rung == rung and r.ladder_option is not None}


def not_in_trl(rung: str = "grpo") -> tuple[Mapping, ...]:
    """The rows of ladder options with no TRL equivalent."""
    return tuple(r for r in all_rows() if r.ladder_rung == rung and r.trl_field is None)


def trl_values(cfg, trl_class: str = "GRPOConfig") -> dict[str, tuple[Any, Mapping]]:
    """TRL field → (its value for the ladder ``cfg``, the row that gave it), from the rows that carry a value
    and apply to ``cfg``. Two applying rows for one field are a bug in the map."""
    values: dict[str, tuple[Any, Mapping]] = {}
    for row in rows(trl_class):
        if row.value is None or row.trl_field is None or not row.applies_to(cfg):
            continue
        if row.trl_field in values:
            raise ValueError(f"{trl_class}.{row.trl_field} is given by two rows: "
                             f"{values[row.trl_field][1].ladder_option} and {row.ladder_option}")
        values[row.trl_field] = (row.value(cfg), row)
    return values
