"""The distill rung's options: grpo's (``GRPOOptions``: the student, its problems, sampling and update), the teacher's
and --export-trl, the ``tiny`` preset, and the rules between them (grpo's, and a teacher that is not the student).

Each option says its names in TRL's ``GKDConfig`` and ``GKDTrainer`` (``trl.experimental.gkd``) where it is declared:
grpo's options that GKD has a word for are re-declared here with those names beside grpo's (``gkd``: grpo's default,
help and domain; ``AS_GRPO``: grpo's GRPOConfig / GRPOTrainer names, which mean the same in GKDConfig / GKDTrainer).
``ladder.trl.map`` makes the rung's rows from them and ``ladder.trl.export_distill`` its script; an option of grpo's
with no GKD name is one GKDTrainer has nothing for (the script lists them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ladder.domains import Text, probability
from ladder.options import option
from ladder.redeclared import SAME_NAMES, redeclared
from ladder.rungs.grpo import kl_to_ref, scoring
from ladder.rungs.grpo import options as grpo_options
from ladder.rungs.grpo import rules as grpo_rules
from ladder.rungs.grpo.efficiency import GRPOEfficiency
from ladder.rungs.grpo.generation import GRPOGeneration
from ladder.rungs.grpo.kl_to_ref import KLToReference
from ladder.rungs.grpo.loss_types import LossSpec
from ladder.rungs.grpo.optimisation import Optimisation
from ladder.rungs.grpo.problems import Problems
from ladder.rungs.grpo.ratio import Ratio
from ladder.rungs.grpo.sampler import Sampler
from ladder.rungs.grpo.scoring import Rewards
from ladder.rungs.lm_options import Adapter
from ladder.runtime.errors import UsageError
from ladder.specs import accepts_flags
from ladder.tasks import math_problems
from ladder.trl_rows import GKD, GKD_TRAINER, GRPO, GRPO_TRAINER, SAME, TRL, const, on_cuda, optimizer_steps

AS_GRPO = SAME_NAMES  # in ``gkd``: the option's GRPOConfig / GRPOTrainer names, as GKDConfig / GKDTrainer names
_GKD_OF = {GRPO: GKD, GRPO_TRAINER: GKD_TRAINER}
_GRPO_FIELDS = {f.name: f for f in dataclasses.fields(grpo_options.GRPOOptions)}


def gkd(declared: str | dataclasses.Field, *names, **by_flag) -> dataclasses.Field:
    """An option re-declared with its GKD names beside its own (``ladder.redeclared``): grpo's (its field's name:
    grpo's default, help and domain) or the rung's (``option(...)``); ``names`` a plain field's, ``by_flag``
    (flag → names) a spec's flags'."""
    return redeclared(_GRPO_FIELDS, _GKD_OF, declared, *names, **by_flag)


def _output_dir(cfg) -> str:
    """GKDConfig's output_dir: OUT-trl (OUT's default, the run's)."""
    return (cfg.out or f"runs/distill-seed{cfg.seed}") + "-trl"


def _dtype(cfg) -> dict:
    return {"dtype": "bfloat16" if on_cuda(cfg) else "float32"}


def _rule_rewards(cfg) -> bool:
    """Whether a rule reward trains (a weight not 0: distill's default logs the correctness at weight 0)."""
    return any(cfg.rewards.column_weights().values())


NO_RATIO = ("GKD takes its loss on each fresh sample directly: no π_old, no importance ratio, nothing to clip. "
            "ladder's ratio is 1 and its clip idle with μ = 1 and M = 1; otherwise its later steps on a sample are "
            "off-policy and clipped")


@accepts_flags
@dataclass
class Config(grpo_options.GRPOOptions):
    # grpo's options that GKD has a word for, with their GKDConfig / GKDTrainer names beside grpo's (``gkd``)
    out: str | None = gkd("out", TRL("output_dir", note="OUT-trl (the adapter or model is saved there; the script's "
                                     "--output-dir overrides it)", value=_output_dir, cls=GKD))
    seed: int = gkd("seed", AS_GRPO)
    device: str = gkd("device", AS_GRPO)
    report_to: str = gkd("report_to", AS_GRPO)
    resume: str | None = gkd("resume", TRL(None, note="TRL resumes its own checkpoints (output_dir/checkpoint-N, "
                                           "trainer.train(resume_from_checkpoint=…)), not ladder's run directories",
                                           cls=GKD))
    overwrite: bool = gkd("overwrite", AS_GRPO)
    checkpoint_every: int = gkd("checkpoint_every", AS_GRPO)
    progress: bool = gkd("progress", AS_GRPO)
    max_nonfinite_updates: int = gkd("max_nonfinite_updates", AS_GRPO)
    use_exercises: bool = gkd("use_exercises", AS_GRPO)
    model: str = gkd("model", AS_GRPO)
    adapter: Adapter = gkd("adapter", lora=AS_GRPO, lora_r=AS_GRPO, lora_alpha=AS_GRPO, qlora=(
        TRL("model_init_kwargs", note="quantization_config: BitsAndBytesConfig, 4-bit nf4, double quantisation "
            "(GKDTrainer takes none of its own: the script adds it to model_init_kwargs)", cls=GKD),
        TRL("peft_config", note="LoRA on every linear layer", cls=GKD_TRAINER)))
    efficiency: GRPOEfficiency = gkd("efficiency", **dict.fromkeys(
        ("gradient_checkpointing", "sampler_loop", "chunk_size", "dequantize_once", "release_memory", "optim"),
        AS_GRPO))
    generation: GRPOGeneration = gkd("generation", max_new_tokens=TRL("max_new_tokens", note="the completion length "
                                                                      "limit", value=SAME, cls=GKD),
                                     temperature=(TRL("temperature", note="sampling τ", value=SAME, cls=GKD),
                                                  TRL(None, note="τ ≠ 1: GKD samples at τ but compares the logits at "
                                                      "τ = 1 (its compute_loss passes no temperature); ladder's "
                                                      "student and teacher log-probs are both at τ",
                                                      applies=lambda cfg: cfg.generation.temperature != 1.0,
                                                      cls=GKD)),
                                     top_p=TRL(None, note="GKDTrainer samples with top_p = 1 and top_k = 0, fixed",
                                               applies=lambda cfg: cfg.generation.top_p < 1.0, cls=GKD),
                                     min_new_tokens=TRL(None, note="GKDTrainer's generation config has no "
                                                        "min_new_tokens", applies=lambda cfg:
                                                        cfg.generation.min_new_tokens > 0, cls=GKD))
    threads: int = gkd("threads", AS_GRPO)
    problems: Problems = gkd("problems", **dict.fromkeys(("task", "dataset", "system_prompt", "eval_size",
                                                          "train_size"), AS_GRPO))
    steps: int = gkd("steps", TRL("max_steps", note="TRL counts optimiser steps: --steps × μ × M, each on a batch "
                                  "sampled afresh from the student", value=lambda cfg: optimizer_steps(cfg, cfg.steps),
                                  cls=GKD))
    max_completions: int = gkd("max_completions", AS_GRPO)
    prompts_per_step: int = gkd("prompts_per_step", TRL(
        "per_device_train_batch_size", "update", "P·G/M completions per optimiser step, one per dataset row "
        "(--prompts-per-step × --group-size ÷ --num-minibatches); ladder's P is the total over all processes, TRL's "
        "batch is per device: the script divides by WORLD_SIZE",
        lambda cfg: cfg.prompts_per_step * cfg.group_size // cfg.num_minibatches, cls=GKD))
    group_size: int = gkd("group_size", TRL(None, note="GKD samples one completion per dataset row: a step's P·G/M "
                                            "completions answer as many prompts, where ladder draws G of each of P "
                                            "(the teacher's per-token reward needs no group)", cls=GKD))
    mu: int = gkd("mu", TRL(None, "update", f"{NO_RATIO}. The script's max_steps counts μ passes as μ freshly "
                            "sampled steps", applies=lambda cfg: cfg.mu > 1, cls=GKD))
    num_minibatches: int = gkd("num_minibatches", TRL(None, "update", "each of ladder's M minibatches of one sample "
                                                      "is a GKD step on a fresh sample of its own "
                                                      "(per_device_train_batch_size P·G/M, max_steps × M)",
                                                      applies=lambda cfg: cfg.num_minibatches > 1, cls=GKD))
    optimisation: Optimisation = gkd("optimisation", lr=AS_GRPO, warmup_steps=AS_GRPO, max_grad_norm=AS_GRPO)
    ratio: Ratio = gkd("ratio", clip_eps=TRL(None, "clipped_surrogate", NO_RATIO,
                                             applies=lambda cfg: cfg.mu * cfg.num_minibatches > 1, cls=GKD))
    objective: LossSpec = gkd("objective", loss_type=TRL(
        None, "aggregate", "GKD's loss is the per-token divergence averaged over the step's completion tokens, "
        "--loss-type bnpo's aggregation (the script divides by the sampled tokens); ladder's --loss-type weighs each "
        "completion's term its own way", applies=lambda cfg: cfg.loss_type != "bnpo", cls=GKD))
    kl: KLToReference = gkd(option(KLToReference(coef=0.0), "grpo's β·KL(π_θ‖π_ref), off by default (β = 0: the "
                                                            "teacher is the anchor)",
                                   spec=kl_to_ref.OPTION.with_defaults(kl_coef=0.0)),
                            kl_coef=TRL(None, "kl_estimate", "GKD has no π_ref: the teacher is its only anchor",
                                        applies=lambda cfg: cfg.kl.coef > 0, cls=GKD))
    sampler: Sampler = gkd("sampler", sampler_dtype=TRL(None, "sampler_weights", "GKDTrainer samples with the "
                                                        "trained weights themselves (ladder's --sampler-dtype "
                                                        "same); a sampler of its own and its correction are not "
                                                        "in GKD", applies=lambda cfg: cfg.sampler.dtype != "same",
                                                        cls=GKD),
                           sampler_correction=TRL(None, "sampler_correction", "see --sampler-dtype: GKD corrects "
                                                  "for no sampler (ladder's none)",
                                                  applies=lambda cfg: cfg.sampler.correction != "none", cls=GKD))
    mask_truncated: bool = gkd("mask_truncated", TRL(None, note="GKD keeps the completions cut at max_new_tokens in "
                                                     "its loss", applies=lambda cfg: cfg.mask_truncated, cls=GKD))
    rewards: Rewards = gkd(option(Rewards(funcs="correctness", weights="0"), "grpo's rule rewards, the correctness "
                                                                             "logged at weight 0 by default: the "
                                                                             "teacher's per-token rewards train",
                                  spec=scoring.OPTION.with_defaults(reward_funcs="correctness", reward_weights="0")),
                           reward_funcs=TRL(None, note="GKDTrainer calls no reward function (the script logs none)",
                                            cls=GKD),
                           reward_weights=TRL(None, "group_relative", "a rule reward that trains (a weight not 0) "
                                              "adds its group-relative Â to the teacher's per-token Â in ladder; "
                                              "GKD's loss is the divergence alone", applies=_rule_rewards, cls=GKD))
    print_samples: int = gkd("print_samples", TRL(None, note="GKDTrainer logs no completions; ladder every N updates "
                                                  "(OUT/completions.jsonl)", cls=GKD))
    eval_every: int = gkd("eval_every", TRL(None, note="the script evaluates nothing; ladder's is greedy held-out "
                                            "accuracy, the teacher's beside the student's (`python -m ladder.run "
                                            "eval --adapter OUTPUT_DIR`)", cls=GKD))
    # the rung's own
    teacher: str = option("Qwen/Qwen2.5-1.5B-Instruct", "π_teacher, frozen: hub id or local directory with the "
                                                        "student's tokenizer (@tiny-math-teacher: the tiny model's "
                                                        "tutor who always carries)", Text(),
                          trl=(TRL("teacher_model_name_or_path", "distillation_rewards", "π_teacher, frozen: the "
                                   "script passes it as GKDTrainer's teacher_model (@tiny-math-teacher: ladder's "
                                   "cached tiny tutor's directory)", lambda cfg: cfg.teacher_source(), cls=GKD),
                               TRL("teacher_model_init_kwargs", note="the dtype the teacher loads in, the student's",
                                   value=_dtype, cls=GKD)))
    discount: float = option(0.0, "γ of the teacher's per-token rewards: each token's Â_t = Σ_{t'≥t} γ^(t'−t)·r_t'; "
                                  "0: each position's own (GKD's at β = 1; on the tiny task never slower to the "
                                  "teacher than 1: benchmarks/RESULTS.md), 1: the whole completion's reverse KL",
                             probability(),
                             trl=(TRL("beta", "generalized_jsd", "1: JSD_β at β = 1 is KL(π_θ ‖ π_teacher) at each "
                                      "position; ladder's policy gradient at --discount 0 is a one-sample estimate "
                                      "of its gradient at the student's own prefixes (ladder.core.distillation)",
                                      const(1.0), cls=GKD),
                                  TRL(None, "discounted_returns", "γ > 0: ladder credits each token with the "
                                      "teacher's rewards of the tokens after it too (γ = 1: the whole completion's "
                                      "reverse KL); GKD has no setting for it, its loss is each position's own "
                                      "(γ = 0): the script trains with β = 1", applies=lambda cfg: cfg.discount > 0,
                                      cls=GKD)))
    export_trl: str | None = option(None, "write this run as a runnable TRL script (trl.experimental.gkd.GKDTrainer) "
                                          "to this file and exit: nothing is trained, no run directory is created",
                                    Text(), trl=(TRL(None, note="the switch that writes this script", cls=GKD),))

    def teacher_source(self) -> str:
        """--teacher as a local path or hub id (ladder's tiny teacher: its directory)."""
        return math_problems.resolve_math_model(self.teacher, "--teacher")


# The TRL classes the rung maps (``Rung.trl_classes``) and the GKDConfig settings it has no flag for (``Rung.trl``)
TRL_CLASSES = (GKD, GKD_TRAINER)
GKD_SETTINGS = (
    TRL("lmbda", note="1: every batch is sampled from the student (on-policy), as ladder samples each update",
        value=const(1.0), cls=GKD),
    TRL("seq_kd", note="not reached at lmbda = 1 (its sequence-level KD trains on the teacher's samples)", cls=GKD),
    TRL("gradient_accumulation_steps", "update", "1: ladder takes one optimiser step per minibatch and accumulates "
        "nothing", const(1), cls=GKD),
    TRL("disable_dropout", note="ladder always turns dropout off in the student (the teacher: eval mode in both)",
        value=const(True), cls=GKD),
    TRL("logging_steps", note="ladder logs every update", value=const(1), cls=GKD),
)


# The tiny student forgets to carry (greedy: wrong on most sums that carry); its tutor's model never does.
PRESETS = {
    "tiny": dict(model=math_problems.TINY_MODEL, teacher=math_problems.TINY_TEACHER, task="arithmetic", lora=True,
                 lora_r=16, lora_alpha=32, steps=30, prompts_per_step=8, group_size=4, lr=1e-3, warmup_steps=5,
                 temperature=1.0, max_new_tokens=28, eval_every=10, eval_size=200, print_samples=10, threads=1,
                 sampler_dtype="same"),
}
ALGOS: dict = {}
RESOLVED = grpo_options.RESOLVED


def validate(cfg: Config) -> None:
    """grpo's rules; the teacher scores the student's samples, so it must not be the student itself."""
    grpo_rules.validate(cfg)
    if cfg.teacher == cfg.model:
        raise UsageError("--teacher is --model: the student would learn from itself (every reward 0)")
