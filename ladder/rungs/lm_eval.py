"""The fixed evaluation protocol for math problems: greedy decoding, rule-checked answers.

``python -m ladder.run eval --task gsm8k --model PATH_OR_ID [--adapter DIR]`` runs it alone, so
numbers before and after training are measured the same way.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ladder import hub
from ladder.cli import Checked, Device, PathKind, Text, at_least, option
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy
from ladder.runlog import UsageError, seed_everything
from ladder.tasks import arithmetic

NAME = "eval"


@torch.no_grad()
def accuracy(policy: CausalLMPolicy, tokenizer, problems: list[dict], system_prompt: str, max_new_tokens: int,
             device, batch_size: int = 64) -> dict:
    """Greedy accuracy and format rate on ``problems``, with the completions."""
    completions = []
    for start in range(0, len(problems), batch_size):
        chunk = problems[start:start + batch_size]
        prompts = [arithmetic.chat_prompt(tokenizer, p["question"], system_prompt) for p in chunk]
        enc = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
        ids, mask = policy.generate(enc.input_ids, enc.attention_mask, max_new_tokens, tokenizer.pad_token_id,
                                    tokenizer.eos_token_id, do_sample=False)
        ids = torch.where(mask.bool(), ids, tokenizer.pad_token_id)
        completions += tokenizer.batch_decode(ids, skip_special_tokens=True)
    answers = [p["answer"] for p in problems]
    correct = arithmetic.correctness_reward(completions, answers)
    formatted = arithmetic.format_reward(completions, answers)
    n = max(len(problems), 1)
    return {"accuracy": sum(correct) / n, "format": sum(formatted) / n, "completions": completions}


def check_context(tokenizer, config, problems: list[dict], system_prompt: str, max_new_tokens: int) -> None:
    """A prompt plus its completion must fit the model's context window (checked before loading weights)."""
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if limit is None:
        return
    longest = max(problems, key=lambda p: len(p["question"]))
    prompt_len = len(tokenizer(arithmetic.chat_prompt(tokenizer, longest["question"], system_prompt)).input_ids)
    if prompt_len + max_new_tokens > limit:
        raise UsageError(f"a prompt of {prompt_len} tokens plus --max-new-tokens {max_new_tokens} exceeds the "
                         f"model's context of {limit} tokens; lower --max-new-tokens or use shorter prompts")


@dataclass
class Config(Checked):
    model: str = option("Qwen/Qwen2.5-0.5B-Instruct", "causal LM: hub id or local directory", Text())
    adapter: str | None = option(None, "a LoRA adapter directory saved by a grpo run (OUT/adapter)",
                                 PathKind("existing_dir"))
    task: str = option("gsm8k", "gsm8k or arithmetic", choices=("gsm8k", "arithmetic"))
    dataset: str = option("openai/gsm8k", "GSM8K hub id or a local .json/.jsonl", Text())
    eval_size: int = option(200, "held-out problems", at_least(1))
    max_new_tokens: int = option(256, "completion length limit", at_least(1))
    system_prompt: str | None = option(None, "system prompt (default: the task's)", Text())
    qlora: bool = option(False, "load the base in 4-bit nf4")
    out: str | None = option(None, "write summary.json and completions.jsonl here", PathKind("dir"))
    device: str = option("cpu", "torch device", Device())
    seed: int = option(0, "random seed", at_least(0))


PRESETS = {"tiny": {"model": "@tiny-math", "task": "arithmetic", "max_new_tokens": 28}}


def train(cfg: Config) -> dict:
    """Evaluate (nothing is trained): greedy accuracy on the task's fixed held-out problems."""
    from ladder.rungs.grpo import resolve_model

    seed_everything(cfg.seed)
    device = quant.check_device(cfg.device)
    if cfg.task == "arithmetic":
        _, problems = arithmetic.train_eval_split(None, cfg.eval_size)
        system_prompt = cfg.system_prompt or arithmetic.TINY_SYSTEM_PROMPT
    else:
        problems = arithmetic.load_gsm8k(cfg.dataset, "test", limit=cfg.eval_size)
        system_prompt = cfg.system_prompt or arithmetic.SYSTEM_PROMPT
    model_path = hub.resolve(resolve_model(cfg.model), "--model")
    tokenizer = quant.load_tokenizer(model_path)
    check_context(tokenizer, quant.load_config(model_path), problems, system_prompt, cfg.max_new_tokens)
    model = quant.load_causal_lm(model_path, device, qlora=cfg.qlora, new_adapter=False)
    if cfg.adapter is not None:
        from peft import PeftModel

        if not (Path(cfg.adapter) / "adapter_config.json").exists():
            raise UsageError(f"--adapter {cfg.adapter}: no adapter_config.json there")
        model = PeftModel.from_pretrained(model, cfg.adapter)
    t0 = time.perf_counter()
    result = accuracy(CausalLMPolicy(model), tokenizer, problems, system_prompt, cfg.max_new_tokens, device)
    summary = {"rung": NAME, "model": cfg.model, "adapter": cfg.adapter, "task": cfg.task,
               "problems": len(problems), "accuracy": result["accuracy"], "format": result["format"],
               "wall_s": time.perf_counter() - t0}
    if cfg.out:
        out = Path(cfg.out)
        out.mkdir(parents=True, exist_ok=True)
        with (out / "completions.jsonl").open("w") as f:
            for p, c in zip(problems, result["completions"]):
                f.write(json.dumps({"question": p["question"], "answer": p["answer"], "completion": c}) + "\n")
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
