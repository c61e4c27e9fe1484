"""ladder's sampler: prefill the prompts once, then one token per step over a key/value cache.

    prefill   the prompts' keys and values; a prompt that G rows share is encoded once and its cache rows
              repeated (``shared_prompts``); z_0 = the logits of each prompt's last position
    step t    q_t = warp(z_t): EOS at −inf while t < min_new_tokens, then z / τ, the k largest, the top-p
              nucleus N_t, renormalised (``sampling_warpers``: the processors ``generate`` applies, in its order)
              c_t ~ q_t (greedy: argmax);  record log q_t(c_t) = log p(c_t) − log Σ_{b∈N_t} p(b)
              a row that drew EOS leaves the batch: its cache rows are dropped, the others go on
              z_{t+1} = the logits of one forward of the live rows' c_t over the cache

The sampler's distribution is exactly q_t: nothing of a model's own ``generation_config`` (a repetition
penalty, min-p) enters it unrecorded. This is the loop Capstone II writes, with three economies: the shared
prompts' prefill, the lm_head run only on the last position, and finished rows out of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ladder.patches import cache_of, with_cache
from ladder.policies.low_precision import sampled_logp, sampling_warpers


@dataclass(frozen=True)
class Sampling:
    """How a token is drawn at each step (``decode``)."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_new_tokens: int = 0
    do_sample: bool = True


def position_ids_for(attention_mask: Tensor) -> Tensor:
    """Positions that skip left padding: the first real token is position 0."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def shared_prompts(prompt_ids: Tensor, prompt_mask: Tensor) -> tuple[Tensor, Tensor] | None:
    """(first row of each distinct prompt, each row's prompt) when some rows repeat a prompt, else None."""
    if prompt_ids.shape[1] == 0 or len(prompt_ids) < 2:
        return None
    keys = torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], dim=1)
    distinct, rows = torch.unique(keys, dim=0, return_inverse=True)
    if len(distinct) == len(keys):
        return None
    first = torch.full((len(distinct),), len(keys), dtype=torch.long, device=keys.device)
    first = first.scatter_reduce(0, rows, torch.arange(len(keys), device=keys.device), reduce="amin")
    return first, rows


def prefill(model: nn.Module, prompt_ids: Tensor, prompt_mask: Tensor, share: bool = True) -> tuple[object, Tensor]:
    """(the prompts' cache, each row's next-token logits ``[B, V]``); a prompt shared by rows is encoded once."""
    shared = shared_prompts(prompt_ids, prompt_mask) if share else None
    first, rows = shared if shared is not None else (slice(None), None)
    out = model(input_ids=prompt_ids[first], attention_mask=prompt_mask[first],
                position_ids=position_ids_for(prompt_mask[first]), use_cache=True, logits_to_keep=1)
    cache, logits = cache_of(out), out.logits[:, -1]
    if rows is not None:
        cache.batch_select_indices(rows)
        logits = logits[rows]
    return cache, logits


def draw(logits: Tensor, step: int, eos_token_id: int | None, sampling: Sampling,
         warpers) -> tuple[Tensor, Tensor]:
    """(tokens [n], log q(token) [n]) from next-token logits ``[n, V]`` at completion step ``step``."""
    scores = logits.float()
    if step < sampling.min_new_tokens and eos_token_id is not None:
        scores[:, eos_token_id] = -torch.inf
    logq = sampled_logp(None, scores, warpers)
    if sampling.do_sample:
        tokens = torch.multinomial(logq.exp(), 1).squeeze(1)
    else:
        tokens = scores.argmax(-1)
    return tokens, logq.gather(1, tokens[:, None]).squeeze(1)


@torch.no_grad()
def decode(model: nn.Module, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int, pad_token_id: int,
           eos_token_id: int | None, sampling: Sampling = Sampling(), share_prompts: bool = True
           ) -> tuple[Tensor, Tensor]:
    """Completions of left-padded prompts ``[B, P]``: (token ids, log q of each) ``[B, T]``, T the steps the
    longest row took; pad and log q 0 after a row's EOS (the EOS itself is its last token)."""
    B = len(prompt_ids)
    completion = torch.full((B, max_new_tokens), pad_token_id, dtype=torch.long, device=prompt_ids.device)
    logq = torch.zeros(B, max_new_tokens, device=prompt_ids.device)
    warpers = sampling_warpers(sampling.temperature, sampling.top_k, sampling.top_p)
    cache, logits = prefill(model, prompt_ids, prompt_mask, share_prompts)
    live = torch.arange(B, device=prompt_ids.device)       # the original row of each row still sampling
    attention, position = prompt_mask.long(), position_ids_for(prompt_mask)[:, -1]
    steps = 0
    for t in range(max_new_tokens):
        tokens, token_logq = draw(logits, t, eos_token_id, sampling, warpers)
        completion[live, t], logq[live, t] = tokens, token_logq
        steps = t + 1
        going = tokens != eos_token_id if eos_token_id is not None else torch.ones_like(tokens, dtype=torch.bool)
        if not going.all():
            live, tokens, attention, position = live[going], tokens[going], attention[going], position[going]
            if len(live) == 0:
                break
            cache.batch_select_indices(going.nonzero().squeeze(1))
        if t + 1 == max_new_tokens:
            break
        attention = torch.cat([attention, attention.new_ones(len(live), 1)], dim=1)
        position = position + 1
        out = model(input_ids=tokens[:, None], attention_mask=attention, position_ids=position[:, None],
                    use_cache=True, **with_cache(cache))
        cache, logits = cache_of(out), out.logits[:, -1]
    return completion[:, :steps], logq[:, :steps]
