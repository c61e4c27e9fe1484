"""The ``eval`` command as it runs: the declaration ``RUNG``, ``train`` (nothing is trained: the task's held-out
problems, checked against the model's context, and config.json, summary.json and completions.jsonl in --out) and
``evaluate`` (the model, and its adapter, loaded; greedy accuracy)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from ladder import hub
from ladder.patches import peft_wraps_quietly
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy
from ladder.rungs.lm_eval.options import Config
from ladder.rungs.protocol import Rung
from ladder.runtime.runlog import RunLog, UsageError, seed_everything
from ladder.tasks import math_eval, math_problems

NAME = "eval"
RUNG = Rung(name=NAME, position=9,
            summary="greedy accuracy of a model (and adapter) on the fixed held-out problems",
            writes="config.json, summary.json, completions.jsonl")


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
