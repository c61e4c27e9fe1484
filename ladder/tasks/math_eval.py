"""The math tasks' fixed evaluation protocol: greedy decoding, rule-checked answers.

The grpo rung measures its held-out accuracy with ``accuracy``, and so does the ``eval`` command
(``ladder.rungs.lm_eval``), on the problems ``ladder.tasks.math_problems.split`` holds out — so numbers
before, during and after training are measured the same way.
"""

from __future__ import annotations

import torch

from ladder.policies.causal_lm import CausalLMPolicy
from ladder.runtime.errors import UsageError
from ladder.tasks import arithmetic, math_problems


@torch.no_grad()
def accuracy(policy: CausalLMPolicy, tokenizer, problems: list[dict], system_prompt: str, max_new_tokens: int,
             device, batch_size: int = 64) -> dict:
    """Greedy accuracy and format rate on ``problems``, with the completions."""
    completions = []
    for start in range(0, len(problems), batch_size):
        chunk = problems[start:start + batch_size]
        prompts = [math_problems.prompt(tokenizer, p, system_prompt) for p in chunk]
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
    prompt_len = len(tokenizer(math_problems.prompt(tokenizer, longest, system_prompt)).input_ids)
    if prompt_len + max_new_tokens > limit:
        raise UsageError(f"a prompt of {prompt_len} tokens plus --max-new-tokens {max_new_tokens} exceeds the "
                         f"model's context of {limit} tokens; lower --max-new-tokens or use shorter prompts")
