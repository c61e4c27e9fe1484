"""π_teacher in the distill rung: loaded frozen beside the student, scoring every token the student sampled, and the
credit its per-token rewards give (what grpo's rollout and credit become here).

    rollout   grpo's sample of P × G completions from the student, then one no-grad forward of each model over them:
              r_t = −(log π_θ − log π_teacher)(y_t)  (``core.distillation_rewards``) on ``Rollout.token_rewards``;
              the completion's reverse KL and its tokens' teacher log-prob logged (``distill/…``)
    credit    Â_t = Σ_{t' ≥ t} γ^(t'−t)·r_t' (``core.discounted_returns``) + the rule rewards' group-relative Â
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from ladder import core, hub
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs.grpo.options import Config
from ladder.rungs.grpo.rollout import Rollout
from ladder.rungs.grpo.step import Step, sample_groups
from ladder.runtime.errors import UsageError


def load_teacher(cfg, student_path: str, student_tokenizer, device: torch.device) -> CausalLMPolicy:
    """π_teacher, frozen and in eval mode, scoring at the student's temperature; a teacher that is the student's own
    weights (every reward 0) or whose vocabulary is not the student's (its log-probs would be of other tokens) is one
    line."""
    path = hub.resolve(cfg.teacher_source(), "--teacher")
    if Path(path).resolve() == Path(student_path).resolve():
        raise UsageError(f"--teacher {cfg.teacher} is the student's own weights (--model {cfg.model}): every reward "
                         "would be 0")
    if quant.load_tokenizer(path, "--teacher").get_vocab() != student_tokenizer.get_vocab():
        raise UsageError(f"--teacher {cfg.teacher}: its tokenizer is not the student's (--model {cfg.model}); the "
                         "teacher must score the student's own tokens")
    model = quant.load_causal_lm(path, device, flag="--teacher").requires_grad_(False).eval()
    return CausalLMPolicy(model, temperature=cfg.generation.temperature, chunk_size=cfg.efficiency.chunk_size)


def with_teacher(teacher: CausalLMPolicy) -> Callable[[Step], tuple[Rollout, int, int]]:
    """grpo's rollout, each completion token then scored by the teacher against the student (π_old)."""
    def rollout(step: Step) -> tuple[Rollout, int, int]:
        sampled, rounds, generated = sample_groups(step)
        return scored_by(teacher, step, sampled), rounds, generated

    return rollout


def scored_by(teacher: CausalLMPolicy, step: Step, rollout: Rollout) -> Rollout:
    """The rollout with each token's reward r_t = −(log π_θ − log π_teacher)(y_t) and, per completion, its reverse KL
    Σ_t (log π_θ − log π_teacher) and its tokens' mean log π_teacher."""
    inputs = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                      step.tokenizer.pad_token_id)
    student_logp = step.policy.old_logp_and_values(inputs)[0].float()
    teacher_logp = teacher.old_logp_and_values(inputs)[0].float()
    rewards = core.distillation_rewards(student_logp, teacher_logp, inputs.mask)
    tokens = inputs.mask.sum(1).clamp(min=1)
    stats = {**(rollout.stats or {}), "distill/reverse_kl": -rewards.sum(1),
             "distill/teacher_logp": (teacher_logp * inputs.mask).sum(1) / tokens}
    return replace(rollout, token_rewards=rewards, stats=stats)


def teacher_credit(rollout: Rollout, advantages: torch.Tensor, cfg: Config) -> torch.Tensor:
    """Â_t of every token ``[n, T]``: the teacher's rewards summed from t on, discounted by --discount, plus the
    completion's rule-reward Â (0 at --reward-weights 0)."""
    mask = rollout.mask.to(rollout.token_rewards.device)
    returns = core.discounted_returns(rollout.token_rewards, mask, cfg.discount)
    return returns + advantages[:, None].to(returns.device)
