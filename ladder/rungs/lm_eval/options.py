"""The ``eval`` command's options: one ``Config``, the ``tiny`` preset, the system prompt decided when it starts
(``RESOLVED``); no rule relates its options (``validate``)."""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_EXAMPLES, MAX_TOKENS, Device, PathKind, Text, count, int_range
from ladder.options import Checked, option
from ladder.rungs.protocol import no_cross_option_rules
from ladder.tasks import math_problems


@dataclass
class Config(Checked):
    model: str = option("Qwen/Qwen2.5-0.5B-Instruct", "causal LM: hub id or local directory", Text())
    adapter: str | None = option(None, "a LoRA adapter directory saved by a grpo run (OUT/adapter)",
                                 PathKind("existing_dir"))
    task: str = option("gsm8k", "gsm8k or arithmetic", choices=math_problems.TASKS)
    dataset: str = option("openai/gsm8k", "GSM8K hub id or a local .json/.jsonl", Text())
    eval_size: int = option(200, "held-out problems (as grpo holds them out; a one-split file: its last rows, "
                                 "at most a fifth of them)", count(1, MAX_EXAMPLES))
    max_new_tokens: int = option(512, "completion length limit (grpo's default, so that accuracy before and "
                                      "after training is measured alike)", count(1, MAX_TOKENS))
    system_prompt: str | None = option(None, "system prompt (default: the task's)", Text())
    qlora: bool = option(False, "load the base in 4-bit nf4")
    out: str | None = option(None, "write config.json, summary.json and completions.jsonl here (a new or empty "
                                   "directory, or an earlier eval's)", PathKind("dir"))
    overwrite: bool = option(False, "replace the earlier eval in --out")
    device: str = option("cpu", "torch device", Device())
    seed: int = option(0, "random seed (at most 2**32 − 1, numpy's largest)", int_range(0, 2**32 - 1))


PRESETS = {"tiny": {"model": "@tiny-math", "task": "arithmetic", "max_new_tokens": 28}}
ALGOS: dict = {}
RESOLVED = {"system_prompt": lambda cfg: math_problems.system_prompt(cfg.task, cfg.system_prompt)}
validate = no_cross_option_rules
