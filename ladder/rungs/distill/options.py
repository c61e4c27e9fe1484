"""The distill rung's options: grpo's (``GRPOOptions``: the student, its problems, sampling and update, without
--export-trl) and the teacher's, the ``tiny`` preset, and the rules between them (grpo's, and a teacher that is not
the student).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import Text, probability
from ladder.options import option
from ladder.rungs.grpo import kl_to_ref, scoring
from ladder.rungs.grpo import options as grpo_options
from ladder.rungs.grpo import rules as grpo_rules
from ladder.rungs.grpo.kl_to_ref import KLToReference
from ladder.rungs.grpo.scoring import Rewards
from ladder.runtime.errors import UsageError
from ladder.specs import accepts_flags
from ladder.tasks import math_problems


@accepts_flags
@dataclass
class Config(grpo_options.GRPOOptions):
    # grpo's, with distillation's defaults: no π_ref (the teacher is the anchor), the correctness logged at weight 0
    kl: KLToReference = option(KLToReference(coef=0.0), "grpo's β·KL(π_θ‖π_ref), off by default (β = 0: the teacher "
                                                        "is the anchor)",
                               spec=kl_to_ref.OPTION.with_defaults(kl_coef=0.0))
    rewards: Rewards = option(Rewards(funcs="correctness", weights="0"), "grpo's rule rewards, the correctness logged "
                                                                         "at weight 0 by default: the teacher's "
                                                                         "per-token rewards train",
                              spec=scoring.OPTION.with_defaults(reward_funcs="correctness", reward_weights="0"))
    teacher: str = option("Qwen/Qwen2.5-1.5B-Instruct", "π_teacher, frozen: hub id or local directory with the "
                                                        "student's tokenizer (@tiny-math-teacher: the tiny model's "
                                                        "tutor who always carries)", Text())
    discount: float = option(1.0, "γ of the teacher's per-token rewards: each token's Â_t = Σ_{t'≥t} γ^(t'−t)·r_t'; "
                                  "1: the whole completion's reverse KL, 0: each position's own (GKD's at β = 1)",
                             probability())

    def teacher_source(self) -> str:
        """--teacher as a local path or hub id (ladder's tiny teacher: its directory)."""
        return math_problems.resolve_math_model(self.teacher)


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
