"""Capstone II's task and the grader's own references (``capstone_grpo`` re-exports what a learner uses).

    tiny_task()        the tiny instruct model, its tokenizer (padding on the left), training and held-out sums,
                       each problem {"question", "answer", "prompt"} with the prompt chat-formatted
    greedy_accuracy()  the grader's own greedy decode (``generate``) and rule check on held-out sums
    reference_logp()   the model's own full forward, scored by ``core.token_logp``
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

MAX_NEW_TOKENS = 28           # the tiny preset's: a worked sum is about 20 tokens
HELD_OUT = 128                # held-out sums the training check scores (the first of the shuffled 8,100)


class Broken(Exception):
    """A property that does not hold: its message says on what input, what was expected and what came back."""


@dataclass
class TinyTask:
    model: torch.nn.Module    # AutoModelForCausalLM (Qwen2, 3 layers, float32, no dropout)
    tokenizer: object         # pads on the left; eos_token_id ends a turn (<|im_end|>)
    train: list[dict]         # {"question": "What is 37 + 45?", "answer": "82", "prompt": chat-formatted text}
    held_out: list[dict]      # never in train


@functools.cache
def _model_dir() -> Path:
    from ladder.tasks import arithmetic

    return arithmetic.tiny_math_model()


@functools.cache
def _weights() -> dict[str, Tensor]:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(_model_dir(), dtype=torch.float32).state_dict()


def load_model():
    """A fresh copy of the tiny instruct model (the weights read from disk once per process)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(_model_dir()), dtype=torch.float32)
    model.load_state_dict(_weights())
    return model.eval()


@functools.cache
def read_once() -> None:
    """Read the model's weights and tokenizer (transformers imported): the grader's own time, spent once before
    a property's limit starts counting."""
    _weights()
    load_tokenizer()


def load_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_model_dir(), padding_side="left")


def tiny_task(held_out: int = HELD_OUT) -> TinyTask:
    """The grpo rung's tiny preset as plain objects: model, tokenizer, training sums and held-out sums.

    The sums are the arithmetic task's 8,100 (two 2-digit numbers), shuffled once; the first ``held_out``
    are held out. A prompt is the chat template applied to the task's system prompt and the question,
    ending where the assistant speaks; the model answers with worked columns and a last line '#### N'.
    """
    train, held = _problems(held_out)
    return TinyTask(load_model(), load_tokenizer(), [dict(p) for p in train], [dict(p) for p in held])


@functools.cache
def _problems(held_out: int) -> tuple[tuple[dict, ...], tuple[dict, ...]]:
    """(training sums, held-out sums), each with its chat prompt: built once per process (0.3 s), copied per task."""
    from ladder.tasks import arithmetic

    tokenizer = load_tokenizer()
    train, held = arithmetic.train_eval_split(None, held_out)

    def with_prompt(problems: list[dict]) -> tuple[dict, ...]:
        return tuple({"question": p["question"], "answer": p["answer"],
                      "prompt": arithmetic.chat_prompt(tokenizer, p["question"], arithmetic.TINY_SYSTEM_PROMPT)}
                     for p in problems)

    return with_prompt(train), with_prompt(held)


def prompt_batch(tokenizer, questions: list[str], extra_left: int = 0) -> tuple[Tensor, Tensor]:
    """Chat prompts of ``questions``, left-padded to the longest and then by ``extra_left`` more columns:
    (ids [B, P] long, attention mask [B, P] long)."""
    from ladder.tasks import arithmetic

    texts = [arithmetic.chat_prompt(tokenizer, q, arithmetic.TINY_SYSTEM_PROMPT) for q in questions]
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    pad = torch.full((len(texts), extra_left), tokenizer.pad_token_id, dtype=torch.long)
    return torch.cat([pad, enc.input_ids], 1), torch.cat([torch.zeros_like(pad), enc.attention_mask], 1)


def reference_logp(model, prompt_ids: Tensor, prompt_mask: Tensor, completion_ids: Tensor, completion_mask: Tensor,
                   temperature: float) -> Tensor:
    """The model's own full forward on prompt + completion (positions skipping the left padding), scored by
    ``core.token_logp``: log π(c_t | prompt, c_<t) at τ, [B, T], 0 where the completion mask is 0."""
    from ladder.core import token_logp
    from ladder.policies.causal_lm import position_ids_for

    ids = torch.cat([prompt_ids, completion_ids], 1)
    attention = torch.cat([prompt_mask.long(), completion_mask.long()], 1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attention, position_ids=position_ids_for(attention)).logits
    P = prompt_ids.shape[1]
    return token_logp(logits[:, P - 1:], ids[:, P - 1:], completion_mask.float(), temperature)


@torch.no_grad()
def greedy_completions(model, tokenizer, prompt_ids: Tensor, prompt_mask: Tensor,
                       max_new_tokens: int = MAX_NEW_TOKENS) -> list[str]:
    """The grader's own greedy decode (transformers' ``generate``) of left-padded prompts, cut at each EOS."""
    out = model.generate(input_ids=prompt_ids, attention_mask=prompt_mask, max_new_tokens=max_new_tokens,
                         do_sample=False, temperature=None, top_p=None, top_k=None,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return tokenizer.batch_decode(out[:, prompt_ids.shape[1]:], skip_special_tokens=True)


def greedy_accuracy(model, tokenizer, problems: list[dict]) -> float:
    """The fraction of ``problems`` whose greedy completion ends with the right '#### N'."""
    from ladder.tasks import arithmetic

    completions = []
    for start in range(0, len(problems), 64):
        enc = tokenizer([p["prompt"] for p in problems[start:start + 64]], return_tensors="pt", padding=True)
        completions += greedy_completions(model, tokenizer, enc.input_ids, enc.attention_mask)
    return sum(arithmetic.correctness_reward(completions, [p["answer"] for p in problems])) / len(problems)


def fmt(x, digits: int = 4) -> str:
    """A small tensor as a nested list rounded to ``digits`` decimals; anything else as its repr."""
    if isinstance(x, Tensor):
        x = x.detach()
        return str(_rounded(x.tolist(), digits) if x.is_floating_point() else x.tolist())
    return repr(x)


def _rounded(values, digits: int):
    return [_rounded(v, digits) for v in values] if isinstance(values, list) else round(values, digits)


def bits(mask: Tensor) -> str:
    """A mask row as '111110000'."""
    return "".join(str(int(v)) for v in mask.tolist())


def max_difference(got: Tensor, want: Tensor, where: Tensor | None = None) -> float:
    diff = (got.detach().float() - want.float()).abs()
    return (diff[where.bool()] if where is not None else diff).max().item() if diff.numel() else 0.0


def fresh(model):
    """A deep copy whose ``generate`` refuses: the learner's sampler must be their own decode loop."""
    model = copy.deepcopy(model)

    def refuse(*args, **kwargs):
        raise Broken("called model.generate; write the decode loop over the model's forward instead")

    model.generate = refuse
    return model


def sampled_completions(model, tokenizer, ids: Tensor, mask: Tensor, seed: int) -> tuple[Tensor, Tensor]:
    """Completions of the prompts drawn by ``generate`` at τ = 1 from ``seed``, and their masks (1 up to and
    including each row's first EOS): the grader's own batches, [B, MAX_NEW_TOKENS at most]."""
    torch.manual_seed(seed)
    out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                         max_new_tokens=MAX_NEW_TOKENS, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)[:, ids.shape[1]:]
    is_eos = (out == tokenizer.eos_token_id).long()
    return out, ((is_eos.cumsum(1) - is_eos) == 0).float()
