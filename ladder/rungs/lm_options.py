"""The options both language-model rungs share (``ppo-sentiment``, ``grpo``), declared once.

A rung's ``Config`` inherits them and re-declares a field only to give it its own default (the model,
the completion length, the chunk size).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.cli import (
    MAX_LORA_ALPHA,
    MAX_STEPS,
    MAX_TOKENS,
    Number,
    OneOf,
    RunOptions,
    Text,
    count,
    int_range,
    interval,
    option,
)
from ladder.policies import SAMPLER_LOOPS


@dataclass
class LMOptions(RunOptions):
    model: str = option("gpt2", "causal LM: hub id or local directory", Text())
    qlora: bool = option(False, "4-bit nf4 base (double quantisation) + LoRA adapters + activation checkpointing "
                                "(implies --lora); π_ref = the base with the adapter disabled")
    lora: bool = option(False, "LoRA adapters on a full-precision base; π_ref = the base with the adapter "
                               "disabled (no copy)")
    lora_r: int = option(16, "LoRA rank r, at most 4096 (a 7B model's width, where the adapter is no longer "
                             "low-rank)", int_range(1, 4096))
    lora_alpha: int = option(32, "LoRA α (the adapter's update is scaled by α / r; at most 65536, 16 × the "
                                 "largest --lora-r)", count(1, MAX_LORA_ALPHA))
    gradient_checkpointing: bool | None = option(None, "recompute activations in backward (default: on with "
                                                       "--qlora)")
    max_new_tokens: int = option(512, "completion length limit (tokens)", count(1, MAX_TOKENS))
    temperature: float = option(1.0, "sampling temperature τ, at least 0.01 (log-probs use the same τ and scale as "
                                     "logits/τ: below 0.01 a logit change of 0.9 overflows the float32 ratio "
                                     "π_θ/π_old; below ~1e-36 logits/τ itself overflows float32 and bfloat16) and "
                                     "at most 100 (sampling is uniform long before)",
                                Number(float, low=0.01, high=100.0, limit=True))
    top_p: float = option(1.0, "nucleus sampling p (1: off): tokens are drawn from the smallest set of most likely "
                                "tokens holding p of the mass, renormalised; π_old, π_θ and π_ref score the whole "
                                "distribution (grpo: --sampler-correction weighs the difference)",
                          interval(0, 1, open_low=True))
    sampler_loop: str = option("ladder", "the sampling loop: ladder (its own KV-cached decode loop: the shared prompts "
                                         "encoded once, finished rows out of the batch, exactly the q_t it records) | "
                                         "generate (transformers' generate, as TRL samples without vLLM)",
                               OneOf(SAMPLER_LOOPS))
    chunk_size: int = option(16, "positions per chunk of the lm_head / log-softmax (rows·chunk·vocab floats at "
                                 "once)", count(1, MAX_TOKENS))
    print_samples: int = option(10, "print sample prompt → completion → reward lines every N updates (0: never)",
                                count(0, MAX_STEPS), aliases=("--sample-every",))
    threads: int = option(0, "torch CPU threads (0: torch's default; at most 1024, more than a CPU has "
                                 "cores)", int_range(0, 1024))


# Options whose value is decided when the run starts, from other options: the rungs load their model with these,
# and --print-config prints them.
def uses_lora(cfg: LMOptions) -> bool:
    """--qlora puts LoRA adapters on its 4-bit base, so it implies --lora."""
    return cfg.lora or cfg.qlora


def gradient_checkpointing(cfg: LMOptions) -> bool:
    """--gradient-checkpointing, or on with --qlora when it is not given."""
    return cfg.qlora if cfg.gradient_checkpointing is None else cfg.gradient_checkpointing



RESOLVED = {"lora": uses_lora, "gradient_checkpointing": gradient_checkpointing}  # a rung's RESOLVED (protocol)
