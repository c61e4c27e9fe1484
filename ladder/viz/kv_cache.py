"""Decoding with a key/value cache, on the tiny models ladder ships: the loop a sampler runs, and its facts.

A causal LM's forward over columns 0 … n−1 returns, at every layer, the keys and values of those columns; the
token at column n attends to them and to its own. A decode loop therefore

    prefill   runs the (left-padded) prompts [B, P] in one forward and keeps every layer's keys and values,
    decodes   one token per forward: the new column alone, with the cache, which appends the column's keys
              and values — step t's forward feeds B tokens and attends to P + t cached columns.

Left padding puts every row's next token in the same, last column; the attention mask (0 on the pads) grows by
a column of ones each step, and the position ids number each row from its first real token:

    position_ids = max(cumsum(mask) − 1, 0)      (``policies.causal_lm.position_ids_for``)

The uncached loop reruns the whole sequence, P + t columns, at every step: the same numbers, more work.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ladder.hub import quiet_progress
from ladder.patches import cache_of, with_cache
from ladder.policies.causal_lm import position_ids_for
from ladder.policies.quant import load_tokenizer

MODELS = {"rotary": "tiny Qwen2 (rotary position embeddings)",
          "absolute": "tiny GPT-2 (a learnt vector per absolute position)"}
PROMPTS = {"rotary": ("2 + 3 =", "What is 17 + 25?", "Add 123 and 4:"),
           "absolute": ("The film", "This movie was so", "I")}


@dataclass
class TinyLM:
    """A tiny model ladder ships, in eval mode, with its tokenizer (padding on the left)."""

    name: str
    model: torch.nn.Module
    tokenizer: object


@functools.cache
def tiny_lm(kind: str) -> TinyLM:
    """``rotary``: the tiny Qwen2 of notebook 5; ``absolute``: the tiny GPT-2 of notebook 4."""
    from transformers import AutoModelForCausalLM

    from ladder.tasks import arithmetic, review_models

    path = {"rotary": arithmetic.tiny_math_model, "absolute": review_models.tiny_model_path}[kind]()
    with quiet_progress():
        model = AutoModelForCausalLM.from_pretrained(path).eval()
    return TinyLM(MODELS[kind], model, load_tokenizer(str(path)))


def left_padded(lm: TinyLM, prompts: tuple[str, ...]) -> tuple[Tensor, Tensor]:
    """(ids [B, P], mask [B, P]): the prompts padded on the left to the longest; mask 0 on the pads."""
    enc = lm.tokenizer(list(prompts), return_tensors="pt", padding=True)
    return enc["input_ids"], enc["attention_mask"]


def grown_mask(mask: Tensor, steps: int) -> Tensor:
    """The attention mask after ``steps`` decode steps: ``steps`` columns of ones appended, [B, P + steps]."""
    return torch.cat([mask, torch.ones(mask.shape[0], steps, dtype=mask.dtype)], dim=1)


def draw(logits: Tensor, temperature: float, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(token [B], log π(token) [B]) drawn from softmax(z / τ) of the last column's logits z."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    token = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
    return token, logp.gather(1, token[:, None]).squeeze(1)


@dataclass
class Decoded:
    """A decode loop's result: the tokens [B, T], their log-probs [B, T] and each step's wall time [T] (s)."""

    tokens: Tensor
    logp: Tensor
    step_seconds: list[float]


@torch.no_grad()
def cached_decode(model, ids: Tensor, mask: Tensor, steps: int, temperature: float = 1.0, seed: int = 0,
                  positions: bool = True) -> Decoded:
    """Prefill, then one token per forward on the cache. Step 0's forward is the prompts [B, P]; step t ≥ 1's
    is the B tokens drawn at step t − 1, at position (the row's previous position) + 1, with the mask grown
    by a column of ones. ``positions=False`` passes no position ids: the model then numbers by column."""
    generator = torch.Generator().manual_seed(seed)
    inputs, position, cache = ids, position_ids_for(mask), None
    tokens, logps, seconds = [], [], []
    for _ in range(steps):
        start = time.perf_counter()
        given = {"position_ids": position} if positions else {}
        out = model(input_ids=inputs, attention_mask=mask, use_cache=True, **given, **with_cache(cache))
        cache = cache_of(out)
        token, logp = draw(out.logits[:, -1], temperature, generator)
        seconds.append(time.perf_counter() - start)
        tokens.append(token)
        logps.append(logp)
        inputs, position, mask = token[:, None], position[:, -1:] + 1, grown_mask(mask, 1)
    return Decoded(torch.stack(tokens, 1), torch.stack(logps, 1), seconds)


@torch.no_grad()
def uncached_decode(model, ids: Tensor, mask: Tensor, steps: int, temperature: float = 1.0,
                    seed: int = 0) -> Decoded:
    """The same draws with no cache: step t's forward reruns the whole sequence, P + t columns, and keeps only
    the last column's logits."""
    generator = torch.Generator().manual_seed(seed)
    sequence = ids
    tokens, logps, seconds = [], [], []
    for _ in range(steps):
        start = time.perf_counter()
        out = model(input_ids=sequence, attention_mask=mask, position_ids=position_ids_for(mask), use_cache=False)
        token, logp = draw(out.logits[:, -1], temperature, generator)
        seconds.append(time.perf_counter() - start)
        tokens.append(token)
        logps.append(logp)
        sequence, mask = torch.cat([sequence, token[:, None]], dim=1), grown_mask(mask, 1)
    return Decoded(torch.stack(tokens, 1), torch.stack(logps, 1), seconds)


def fastest_of(runs: list[Decoded]) -> Decoded:
    """The first run, with each step's time the least over the runs (timeit's rule: the others were slowed by
    whatever else the machine was doing)."""
    fastest = [min(seconds) for seconds in zip(*(run.step_seconds for run in runs))]
    return Decoded(runs[0].tokens, runs[0].logp, fastest)


@functools.cache
def both_loops(rows: int = 8, steps: int = 48, seed: int = 0, repeats: int = 2) -> dict:
    """Both loops on the tiny Qwen2, ``rows`` left-padded prompts (those of ``PROMPTS`` in turn), ``steps`` new
    tokens each, the same seed: their tokens, the largest log-prob difference and each step's time, the least
    of ``repeats`` runs (computed once, then cached). A first forward keeps one-off start-up costs out of both."""
    lm = tiny_lm("rotary")
    prompts = tuple(PROMPTS["rotary"][i % len(PROMPTS["rotary"])] for i in range(rows))
    ids, mask = left_padded(lm, prompts)
    cached_decode(lm.model, ids, mask, 2)
    cached = fastest_of([cached_decode(lm.model, ids, mask, steps, seed=seed) for _ in range(repeats)])
    uncached = fastest_of([uncached_decode(lm.model, ids, mask, steps, seed=seed) for _ in range(repeats)])
    return {"rows": rows, "prompt_len": ids.shape[1], "steps": steps, "cached": cached, "uncached": uncached,
            "same_tokens": bool(torch.equal(cached.tokens, uncached.tokens)),
            "max_logp_diff": (cached.logp - uncached.logp).abs().max().item(),
            "cached_seconds": sum(cached.step_seconds), "uncached_seconds": sum(uncached.step_seconds)}


def tokens_fed(batch: int, prompt_len: int, steps: int) -> dict:
    """Tokens each loop feeds the model at steps 0 … steps − 1: the cached loop B·P at prefill then B a step;
    the uncached one B·(P + t) at step t, so its total B·(T·P + T(T − 1)/2) grows with the square of T."""
    t = torch.arange(steps)
    cached = torch.where(t == 0, batch * prompt_len, batch)
    uncached = batch * (prompt_len + t)
    return {"cached": cached, "uncached": uncached}


def last_logp(model, ids: Tensor, mask: Tensor, positions: bool) -> Tensor:
    """log π(· | prompt) of each row's next token [B, V], from one forward, with or without position ids."""
    given = {"position_ids": position_ids_for(mask)} if positions else {}
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, **given).logits[:, -1]
    return torch.log_softmax(logits.float(), dim=-1)


def forgotten_positions(kind: str) -> dict:
    """How far each row's next-token log-probs in the left-padded batch of ``PROMPTS[kind]`` are from those of
    the prompt run alone (no padding): with the position ids, and without them (numbered by column)."""
    lm = tiny_lm(kind)
    ids, mask = left_padded(lm, PROMPTS[kind])
    alone = torch.cat([last_logp(lm.model, *left_padded(lm, (p,)), positions=True) for p in PROMPTS[kind]])
    gaps = {}
    for positions in (True, False):
        gap = (last_logp(lm.model, ids, mask, positions) - alone).abs().amax(dim=1)
        gaps["with" if positions else "without"] = gap.max().item()
    return {"name": lm.name, "pads": (mask == 0).sum(1).tolist(), **gaps}
