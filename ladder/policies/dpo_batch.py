"""Preference pairs as a causal LM's batch for DPO: each completion scored token by token after its prompt.

    completion_ids(tokenizer, pair)   (prompt ids, chosen ids, rejected ids) as TRL's ``DPOTrainer`` makes them:
                                      plain text with EOS appended once to each completion, or messages through
                                      the chat template (the prompt with its generation prompt); x + y tokenized
                                      whole and the completion taken from where it parts from the prompt alone
    dpo_batch(tokenizer, pairs)       the ``core.Batch``: 2B rows, row 2i pair i's prompt + chosen and row 2i + 1
                                      its prompt + rejected (``rows_per_group`` 2, so minibatching keeps each pair
                                      whole); prompts left-padded, completions right-padded; the mask on the
                                      completion tokens, the advantages zero (a pair's preference is its order)
    check_pairs(tokenizer, config, …)  before any weight loads, the pairs as the model will take them: a chat
                                      template for conversations, and every prompt + completion within the model's
                                      context; one line naming the row and the field (both preference rungs)
"""

from __future__ import annotations

import torch

from ladder.core import Batch
from ladder.policies.causal_lm import lm_batch
from ladder.runtime.errors import UsageError

# Tokens a tokenizer may add beyond one per UTF-8 byte of the text (BOS, EOS, a leading-space marker): a text of at
# most ``context − SLACK`` bytes fits without being tokenized (each token of a byte-level or sentencepiece tokenizer
# spells at least one byte; a chat template's special tokens are in the rendered text).
SLACK = 16


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


def context_limit(config) -> int | None:
    """The model's context window in tokens (None where its config does not say)."""
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def _whole_text(tokenizer, pair: dict, field: str) -> str:
    """The text of prompt + the ``field`` completion as ``completion_ids`` and the reward model tokenize it: plain
    text with EOS appended once, or the conversation through the chat template."""
    if isinstance(pair[field], str):
        eos = tokenizer.eos_token or ""
        return pair["prompt"] + (pair[field] if pair[field].endswith(eos) else pair[field] + eos)
    return tokenizer.apply_chat_template(pair["prompt"] + pair[field], tokenize=False)


def check_pairs(tokenizer, config, pairs: list[tuple[str, dict]], dataset: str, model: str,
                need_prompt: bool = False) -> None:
    """``pairs`` ((where, pair) of ``tasks.preference_pairs.located_pairs``) as the model will take them, before any
    weight loads: conversations need a chat template (one that renders them), a prompt where ``need_prompt`` (DPO
    scores each completion after its prompt), and each prompt + completion must fit the model's context (``config``:
    its max_position_embeddings / n_positions). Each text is tokenized only where its bytes could exceed it."""
    if any(isinstance(p["chosen"], list) for _, p in pairs) and not getattr(tokenizer, "chat_template", None):
        raise UsageError(f"--model {model} has no chat template; the conversational pairs of --dataset {dataset} "
                         f"need one (pass a chat model, or pairs of plain strings)")
    limit = context_limit(config)
    for where, pair in pairs:
        if need_prompt and not pair["prompt"]:
            raise UsageError(f"--dataset {dataset}: {where}: the prompt is empty; DPO scores each completion after "
                             f"its prompt")
        if limit is None:
            continue
        for field in ("chosen", "rejected"):
            try:
                text = _whole_text(tokenizer, pair, field)
                if len(text.encode()) + SLACK <= limit:
                    continue
                length = len(_ids(tokenizer, text) if isinstance(pair[field], str)
                             else _ids(tokenizer, pair["prompt"] + pair[field]))
                prompt = len(prompt_ids(tokenizer, pair["prompt"])) if pair["prompt"] else 0
            except Exception as e:  # noqa: BLE001 - a chat template that refuses the conversation (a jinja error)
                if isinstance(pair[field], str):
                    raise
                detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
                raise UsageError(f"--dataset {dataset}: {where}: the chat template of --model {model} cannot render "
                                 f"'{field}' ({type(e).__name__}: {detail})") from None
            if length > limit:
                raise UsageError(f"--dataset {dataset}: {where}: a prompt of {prompt} tokens plus its '{field}' "
                                 f"completion of {max(length - prompt, 0)} tokens exceeds the model's context of "
                                 f"{limit} tokens (--model {model}); shorten the pair or leave it out")
