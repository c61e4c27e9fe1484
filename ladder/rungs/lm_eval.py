"""The ``eval`` command: greedy accuracy of a model (and adapter) on a math task's held-out problems.

``python -m ladder.run eval --task gsm8k --model PATH_OR_ID [--adapter DIR]`` runs the task's fixed
protocol (``ladder.tasks.math_eval``) on the problems a grpo run with the same ``--task``, ``--dataset``
and ``--eval-size`` holds out (``ladder.tasks.math_problems.split``; a local file: its last rows), so
numbers before and after training are measured the same way, on problems the run never trained on.

With ``--out DIR`` it writes DIR/config.json, DIR/summary.json and DIR/completions.jsonl, into a new or empty
directory or, with ``--overwrite``, over an earlier eval's; never into another rung's run directory.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ladder import hub
from ladder.cli import MAX_EXAMPLES, MAX_TOKENS, Checked, Device, PathKind, Text, count, int_range, option
from ladder.patches import peft_wraps_quietly
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy
from ladder.rungs.protocol import Rung, no_cross_option_rules
from ladder.runtime.runlog import RunLog, UsageError, seed_everything
from ladder.tasks import math_eval, math_problems

NAME = "eval"
RUNG = Rung(name=NAME, position=8,
            summary="greedy accuracy of a model (and adapter) on the fixed held-out problems",
            writes="config.json, summary.json, completions.jsonl")


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


def train(cfg: Config) -> dict:
    """Evaluate (nothing is trained): greedy accuracy on the task's fixed held-out problems."""
    seed_everything(cfg.seed)
    device = quant.check_device(cfg.device)
    _, problems = math_problems.split(cfg.task, cfg.dataset, cfg.eval_size)
    system_prompt = math_problems.system_prompt(cfg.task, cfg.system_prompt)
    model_path = hub.resolve(math_problems.resolve_math_model(cfg.model), "--model")
    tokenizer = quant.load_tokenizer(model_path)
    math_eval.check_context(tokenizer, quant.load_config(model_path), problems, system_prompt, cfg.max_new_tokens)
    files = RunLog(cfg.out, NAME, {"rung": NAME, **asdict(cfg)}, overwrite=cfg.overwrite, trains=False) \
        if cfg.out else None
    try:
        summary, completions = evaluate(cfg, model_path, tokenizer, problems, system_prompt, device)
        if files is not None:
            files.write_file("completions.jsonl", "".join(
                json.dumps({"question": p["question"], "answer": p["answer"], "completion": c}) + "\n"
                for p, c in zip(problems, completions)))
            files.write_file("summary.json", json.dumps(summary, indent=2))  # last: it marks a finished eval
            files.started()  # the eval --overwrite replaced is gone for good
    except BaseException:
        if files is not None:  # nothing of value yet: a directory this eval created goes again
            files.close(discard=not (files.dir / "summary.json").exists())
        raise
    if files is not None:
        files.close()
    return summary


def evaluate(cfg: Config, model_path: str, tokenizer, problems: list[dict], system_prompt: str, device) -> tuple:
    """(the summary, the completions) of the model (and adapter) on ``problems``."""
    model = quant.load_causal_lm(model_path, device, qlora=cfg.qlora, new_adapter=False)
    if cfg.adapter is not None:
        from peft import PeftModel

        if not (Path(cfg.adapter) / "adapter_config.json").exists():
            raise UsageError(f"--adapter {cfg.adapter}: no adapter_config.json there")
        quant.check_adapter(cfg.adapter, model, cfg.model)  # trained on another base model: one line
        with peft_wraps_quietly():
            model = PeftModel.from_pretrained(model, cfg.adapter)
    t0 = time.perf_counter()
    result = math_eval.accuracy(CausalLMPolicy(model), tokenizer, problems, system_prompt, cfg.max_new_tokens, device)
    summary = {"rung": NAME, "model": cfg.model, "adapter": cfg.adapter, "task": cfg.task,
               "problems": len(problems), "accuracy": result["accuracy"], "format": result["format"],
               "wall_s": time.perf_counter() - t0}
    return summary, result["completions"]
