"""On-policy distillation as the loop runs it: the declaration ``RUNG``, the curves, ``train`` and ``build`` — grpo's
recipe on the math problems, its rollout scored token by token by the teacher (``teacher``), and the teacher's own
held-out accuracy drawn beside the student's."""

from __future__ import annotations

from dataclasses import replace

import torch

from ladder.plots import Panel
from ladder.rungs import grpo
from ladder.rungs.distill.options import GKD_SETTINGS, TRL_CLASSES, Config, validate
from ladder.rungs.distill.teacher import load_teacher, teacher_credit, with_teacher
from ladder.rungs.protocol import Rung
from ladder.runtime.session import RunSession
from ladder.tasks import math_problems

NAME = "distill"
RUNG = Rung(name=NAME, position=8,
            summary="on-policy distillation: the student samples, the teacher scores every token (reverse KL)",
            # grpo's step, the returns of the teacher's rewards and the rewards
            exercises=(*grpo.RUNG.exercises, "ex01_discounted_returns", "ex28_distillation_rewards"),
            vitals=("taught_accuracy", "reverse_kl", "teacher_logp", "entropy", "clip", "ratio", "length", "grad_norm"),
            export="ladder.trl.export_distill:write_distill", trl_classes=TRL_CLASSES, trl=GKD_SETTINGS)
CURVES = [Panel("reverse KL to the teacher", "nats per completion (sampled)", {"distill/reverse_kl": ""}),
          Panel("greedy accuracy (held-out)", "share correct",
                {"eval_accuracy": "student", "teacher_accuracy": "teacher"}),  # step 0: before training
          Panel("log π_teacher of the student's tokens", "nats per token (mean)", {"distill/teacher_logp": ""}),
          Panel("correctness of the samples", "share correct (a rule reward)", {"rewards/correctness/mean": ""}),
          Panel("completion length", "tokens (mean)", {"completions/mean_length": ""})]


class Distill(grpo.GRPO):
    """grpo's recipe with the teacher: its held-out accuracy, measured once, logged with the student's."""

    teacher: object = None

    def evaluate(self) -> dict:
        if "teacher_accuracy" not in self.counters:
            with torch.no_grad():
                self.counters["teacher_accuracy"] = grpo.held_out_accuracy(replace(self.step, policy=self.teacher),
                                                                          self.task.held_out)
        return {**super().evaluate(), "teacher_accuracy": self.counters["teacher_accuracy"]}

    def update(self) -> dict:
        """grpo's update; the completions' mean reverse KL to the teacher kept for the summary."""
        record = super().update()
        self.counters.setdefault("reverse_kl", []).append(record["distill/reverse_kl"])
        return record

    def row_extras(self, rollout) -> dict[str, torch.Tensor]:
        """Each completion's reverse KL to the teacher, Σ_t (log π_θ − log π_teacher), and its tokens' mean
        log π_teacher, beside grpo's row (whose ``advantage`` is the rule reward's group Â: 0 at weight 0)."""
        stats = rollout.stats or {}
        return {name: stats[f"distill/{name}"] for name in ("reverse_kl", "teacher_logp") if f"distill/{name}" in stats}

    def summary(self) -> dict:
        """grpo's summary, the teacher's held-out accuracy, and the reverse KL Σ_t log π_θ/π_teacher per completion
        over the first and the last five updates."""
        kl = self.counters.get("reverse_kl", [])
        first, last = kl[:5], kl[-5:]
        return {**super().summary(), "teacher": self.cfg.teacher,
                "teacher_accuracy": self.counters.get("teacher_accuracy"),
                "reverse_kl_first5": sum(first) / max(len(first), 1), "reverse_kl_last5": sum(last) / max(len(last), 1)}


def build(cfg: Config, run: RunSession, recipe: type[Distill] = Distill) -> Distill:
    """grpo's recipe on the math problems (``grpo.math_task``), its rollout scored by the teacher and credited
    per token (``with_teacher``, ``teacher_credit``); ``recipe``: ``Distill`` or a study's subclass of it."""
    task = grpo.math_task(cfg)
    teacher = load_teacher(cfg, task.model_path, task.tokenizer, run.procs.device)
    task = replace(task, rollout=with_teacher(teacher), credit=teacher_credit, curves=list(CURVES))
    made = grpo.task_recipe(cfg, run, task, recipe=recipe)
    made.teacher = teacher
    return made


def train(cfg: Config) -> dict:
    """Distil the teacher into the student on the math problems (``build``)."""
    validate(cfg)
    return grpo.train_on(cfg, NAME, build, load_task_model=lambda cfg: math_problems.resolve_math_model(cfg.model))
