"""On-policy distillation as the loop runs it: the declaration ``RUNG``, the curves, ``train`` and ``build`` — grpo's
recipe on the math problems, its rollout scored token by token by the teacher (``teacher``), and the teacher's own
held-out accuracy drawn beside the student's."""

from __future__ import annotations

from dataclasses import replace

import torch

from ladder.plots import Panel
from ladder.rungs import grpo
from ladder.rungs.distill.options import Config, validate
from ladder.rungs.distill.teacher import load_teacher, teacher_credit, with_teacher
from ladder.rungs.protocol import Rung
from ladder.runtime.session import RunSession
from ladder.tasks import math_problems

NAME = "distill"
RUNG = Rung(name=NAME, position=8,
            summary="on-policy distillation: the student samples, the teacher scores every token (reverse KL)",
            exercises=grpo.RUNG.exercises, vitals=("accuracy", "entropy", "clip", "ratio", "length", "grad_norm"))
CURVES = [Panel("reverse KL to the teacher", "Σ_t log π_θ/π_teacher (mean)", {"distill/reverse_kl": ""}),
          Panel("greedy accuracy (held-out)", "share correct",
                {"eval_accuracy": "student", "teacher_accuracy": "teacher"}),  # step 0: before training
          Panel("log π_teacher of the student's tokens", "nats per token (mean)", {"distill/teacher_logp": ""}),
          Panel("correctness of the samples", "mean over the update's completions", {"rewards/correctness/mean": ""}),
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

    def summary(self) -> dict:
        return {**super().summary(), "teacher": self.cfg.teacher,
                "teacher_accuracy": self.counters.get("teacher_accuracy")}


def build(cfg: Config, run: RunSession) -> Distill:
    """grpo's recipe on the math problems (``grpo.math_task``), its rollout scored by the teacher and credited
    per token (``with_teacher``, ``teacher_credit``)."""
    task = grpo.math_task(cfg)
    teacher = load_teacher(cfg, task.tokenizer, run.procs.device)
    task = replace(task, rollout=with_teacher(teacher), credit=teacher_credit, curves=list(CURVES))
    recipe = grpo.task_recipe(cfg, run, task, recipe=Distill)
    recipe.teacher = teacher
    return recipe


def train(cfg: Config) -> dict:
    """Distil the teacher into the student on the math problems (``build``)."""
    validate(cfg)
    return grpo.train_on(cfg, NAME, build, load_task_model=lambda cfg: math_problems.resolve_math_model(cfg.model))
