"""The problems grpo trains and evaluates on — one spec, its flags.

    Problems(task, dataset, system_prompt, eval_size, train_size)
        task           gsm8k (GSM8K word problems) | arithmetic (synthetic, offline)
        dataset        GSM8K hub id or a local .json/.jsonl with question/answer (gsm8k only)
        system_prompt  the system prompt (None: the task's; decided once, by ``settle``)
        eval_size      problems held out for the greedy evaluation
        train_size     the training problems kept (0: all)

``Config.problems`` holds it, built from ``--task``, ``--dataset``, ``--system-prompt``, ``--eval-size`` and
``--train-size`` (the last two listed where they always were, before ``--export-trl``); ``setup`` loads them
(``math_problems.split``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_EXAMPLES, OneOf, Text, count
from ladder.specs import FixedSpec, Param
from ladder.tasks import math_problems
from ladder.trl_rows import GRPO_TRAINER, TRL


@dataclass(frozen=True)
class Problems:
    task: str = "gsm8k"
    dataset: str = "openai/gsm8k"
    system_prompt: str | None = None
    eval_size: int = 200
    train_size: int = 0

    def split(self, prompts_per_step: int, task: str | None = None) -> tuple[list[dict], list[dict]]:
        """(training problems, held-out problems): ``math_problems.split`` of these (``task``: another's, the
        agent's gsm8k environment)."""
        return math_problems.split(task or self.task, self.dataset, self.eval_size, self.train_size, prompts_per_step)




def _dataset(note: str) -> tuple[TRL, ...]:
    return (TRL("train_dataset", note=note, cls=GRPO_TRAINER),)


PARAMS = (
    Param("task", Problems, "task", "gsm8k (GSM8K word problems) or arithmetic (synthetic, offline)",
          OneOf(("gsm8k", "arithmetic")),
          trl=_dataset("the training problems of ladder.tasks.math_problems.split, the grpo rung's: gsm8k's train "
                       "split, or the synthetic sums not held out")),
    Param("dataset", Problems, "dataset", "GSM8K hub id or a local .json/.jsonl with question/answer", Text(),
          trl=_dataset("a hub id, or a local .json/.jsonl (one split: its tail held out, as ladder does)")),
    Param("system_prompt", Problems, "system_prompt", "system prompt (default: the task's)", Text(),
          trl=_dataset("chat messages: system, then the question")),
    Param("eval_size", Problems, "eval_size", "held-out problems in the evaluation", count(1, MAX_EXAMPLES),
          trl=_dataset("arithmetic: the first N sums are held out; a local file: min(N, rows/5) of its tail")),
    Param("train_size", Problems, "train_size", "limit the training problems (0: all)", count(0, MAX_EXAMPLES),
          trl=_dataset("the first N training problems")),
)

OPTION = FixedSpec("problems", Problems, PARAMS, placed={"eval_size": "export_trl", "train_size": "export_trl"})
