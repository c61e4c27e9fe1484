"""Preference pairs as a causal LM's batch for DPO: each completion scored token by token after its prompt.

    completion_ids(tokenizer, pair)   (prompt ids, chosen ids, rejected ids) as TRL's ``DPOTrainer`` makes them:
                                      plain text with EOS appended once to each completion, or messages through
                                      the chat template (the prompt with its generation prompt); x + y tokenized
                                      whole and the completion taken from where it parts from the prompt alone
    dpo_batch(tokenizer, pairs)       the ``core.Batch``: 2B rows, row 2i pair i's prompt + chosen and row 2i + 1
                                      its prompt + rejected (``rows_per_group`` 2, so minibatching keeps each pair
                                      whole); prompts left-padded, completions right-padded; the mask on the
                                      completion tokens, the advantages zero (a pair's preference is its order)
"""

from __future__ import annotations

import torch

from ladder.core import Batch
from ladder.policies.causal_lm import lm_batch


def _ids(tokenizer, conversation_or_text, **template) -> list[int]:
    if isinstance(conversation_or_text, str):
        return tokenizer(conversation_or_text)["input_ids"]
    return tokenizer.apply_chat_template(conversation_or_text, tokenize=True, return_dict=True, **template)["input_ids"]


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def prompt_ids(tokenizer, prompt) -> list[int]:
    """A prompt's ids as the model is asked to continue it: plain text as it is, messages through the chat
    template with the generation prompt."""
    if isinstance(prompt, str):
        return _ids(tokenizer, prompt)
    return _ids(tokenizer, prompt, add_generation_prompt=True)


def completion_ids(tokenizer, pair: dict) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids, chosen completion ids, rejected completion ids) of a pair of ``tasks.preference_pairs``."""
    prompt, chosen, rejected = pair["prompt"], pair["chosen"], pair["rejected"]
    if isinstance(chosen, str):
        eos = tokenizer.eos_token
        chosen, rejected = (c if c.endswith(eos) else c + eos for c in (chosen, rejected))
    alone, full = prompt_ids(tokenizer, prompt), [_ids(tokenizer, prompt + c) for c in (chosen, rejected)]
    start = min(_shared(alone, full[0]), _shared(alone, full[1]))
    return alone[:start], full[0][start:], full[1][start:]


def padded(rows: list[list[int]], pad: int, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(row) for row in rows)
    ids = [[pad] * (width - len(r)) + r if left else r + [pad] * (width - len(r)) for r in rows]
    mask = [[0] * (width - len(r)) + [1] * len(r) if left else [1] * len(r) + [0] * (width - len(r)) for r in rows]
    return torch.tensor(ids), torch.tensor(mask)


def dpo_batch(tokenizer, pairs: list[dict], device: torch.device | str = "cpu") -> Batch:
    """The pairs as ``core.update`` takes them for DPO (see the module doc); ``ref_logp`` is the caller's to add."""
    prompts, completions = [], []
    for pair in pairs:
        prompt, chosen, rejected = completion_ids(tokenizer, pair)
        prompts += [prompt, prompt]
        completions += [chosen, rejected]
    prompt_tokens, prompt_mask = padded(prompts, tokenizer.pad_token_id, left=True)
    completion, mask = padded(completions, tokenizer.pad_token_id, left=False)
    batch = lm_batch(prompt_tokens.to(device), prompt_mask.to(device), completion.to(device), mask.to(device),
                     tokenizer.pad_token_id, advantages=torch.zeros(mask.shape, device=device))
    batch.rows_per_group = 2
    return batch
