"""The multi-turn rollout: the model writes a turn, the environment answers, the model goes on — in token ids,
on one key/value cache.

Every row of the batch advances one token per step. A row is in one of three states:

    the model's turn      the next token is sampled from π(· | everything so far) and recorded:
                          mask 1 (an action: log-prob, KL, entropy, advantage), attention 1
    the environment's     the next token is the next of the tool's reply, tokenized once when the model's
                          turn ended and queued: mask 0 (context, not an action), attention 1
    done                  pad: mask 0, attention 0

so the trajectory is one ``[B, T]`` row with two masks, and each token — the model's or the environment's —
goes through the model once, on the cache: nothing is re-encoded when a turn begins, and the model's own tokens
are never decoded and re-tokenized into the sequence (decoding only reads them, to parse a call).

A model turn ends at EOS (the template's end of turn). If it holds tool calls (``tool_calls.parse_tool_calls``),
each is run against the row's environment (in at most ``--max-tool-calls`` turns, TRL's count; a call in a later
turn, a malformed call, an unknown tool or a tool that raises, exits or runs past ``tool_calls.tool_time_limit`` is
answered with an error the model reads) and the chat template's rendering of the replies is queued; a turn
without a call is the answer and ends the trajectory. A reply that would not fit in the token budget
``max_new_tokens`` ends it too (truncated, as TRL drops such a reply), as does the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from ladder.core.swappable import swappable
from ladder.patches import cache_of, with_cache
from ladder.policies.causal_lm import _eval_mode, position_ids_for, shared_prompts
from ladder.policies.low_precision import sampled_logp, sampling_warpers
from ladder.tasks import tool_calls


@dataclass
class Trajectories:
    """B trajectories, ``[B, T]`` each (T: the steps the longest took)."""

    completion: Tensor       # [B, T] the model's and the environment's tokens, pad after the end
    mask: Tensor             # [B, T] 1 on the model's tokens (EOS of each turn included): the loss mask
    attention_mask: Tensor   # [B, T] 1 on every token the model reads: its own and the environment's
    sampling_logp: Tensor    # [B, T] log π_sampler of the model's tokens, as drawn: top-p's q (0 elsewhere)
    turn: Tensor             # [B, T] the model turn a token belongs to (−1: the environment's, pad)
    truncated: Tensor        # [B] bool: the budget ran out before the model answered
    tool_calls: Tensor       # [B] tool calls made (those past --max-tool-calls included)
    tool_failures: Tensor    # [B] calls answered with an error
    turns: Tensor            # [B] model turns
    answers: list[str] = field(default_factory=list)  # [B] the answer (a turn without a call): what rewards read;
    #                                                   "" when the budget ran out first (no answer, no credit)

    @property
    def env_tokens(self) -> Tensor:
        """[B] the environment's tokens in each trajectory (attended, not trained on)."""
        return (self.attention_mask - self.mask).sum(1)


class _Row:
    """One trajectory's state while it is being sampled."""

    def __init__(self, env):
        self.tools = tool_calls.tools_of(env)
        self.queue: list[int] = []       # the environment's tokens still to feed
        self.turn_tokens: list[int] = []  # the model's current turn
        self.turns = self.calls = self.failures = self.calling_turns = 0
        self.done = self.truncated = False
        self.answer_ids: list[int] = []  # the answer's tokens (a turn without a call, its EOS left out)
        self.segments: list[tuple[str, list[int]]] = []  # ("model" | "env", token ids), in order
        self.logps: list[float] = []     # log π_sampler of each of the model's tokens, in order

    def add(self, kind: str, token: int) -> None:
        """Append a token to the trajectory: to the current segment if it is of the same kind, else a new one."""
        if not self.segments or self.segments[-1][0] != kind:
            self.segments.append((kind, []))
        self.segments[-1][1].append(token)

    def end_turn(self, tokenizer, max_tool_calls: int, room: int) -> None:
        """The model ended a turn (EOS): an answer ends the trajectory; calls queue the environment's reply."""
        text = tokenizer.decode(self.turn_tokens[:-1], skip_special_tokens=False)
        calls = tool_calls.parse_tool_calls(text)
        if not calls:
            self.answer_ids, self.done = self.turn_tokens[:-1], True
        self.turn_tokens = []
        self.turns += 1
        if not calls:
            return
        replies, self.calling_turns = [], self.calling_turns + 1
        for call in calls:
            self.calls += 1
            if self.calling_turns > max_tool_calls:  # TRL's count: turns that call tools, not calls
                reply, failed = tool_calls.over_budget(call, max_tool_calls), True
            else:
                reply, failed = tool_calls.call_tool(self.tools, call)
            replies.append(reply)
            self.failures += failed
        suffix = tool_calls.suffix_ids(tokenizer, replies)
        if len(suffix) >= room:  # no room left for the model to read the reply and answer
            self.done = self.truncated = True
        else:
            self.queue = suffix


def _draw(logits: Tensor, temperature: float, top_p: float, do_sample: bool,
          generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """(tokens [B], log π_sampler(token) [B]) from the last position's logits. Sampling draws from q: p =
    softmax(z / τ) cut to the top-p nucleus N (generate's own warpers, ``sampling_warpers``) and renormalised,
    and records the log-prob of that distribution,

        log q(a) = log p(a) − log Σ_{b∈N} p(b);

    greedy takes the argmax of p and records its log p. z / τ is taken as ``scaled_logits`` computes it: finite
    for every τ > 0, so no temperature makes the draw fail."""
    scaled = scaled_logits(logits, temperature)
    if not do_sample:
        logp = torch.log_softmax(scaled, dim=-1)
        tokens = logp.argmax(-1)
        return tokens, logp.gather(1, tokens[:, None]).squeeze(1)
    logq = sampled_logp(None, scaled, sampling_warpers(1.0, top_p=top_p))
    tokens = torch.multinomial(logq.exp(), 1, generator=generator).squeeze(1)
    return tokens, logq.gather(1, tokens[:, None]).squeeze(1)


def scaled_logits(logits: Tensor, temperature: float) -> Tensor:
    """(z − max z) / τ in float32: the same softmax as z / τ, with 0 at the largest logit and every other entry
    ≤ 0 or −inf — never NaN, even where τ is so small that z / τ overflows (or τ rounds to 0 in float32) or so
    large that it rounds to inf."""
    shifted = logits.float() - logits.float().max(-1, keepdim=True).values
    scaled = torch.where(shifted == 0, 0.0, shifted / temperature)
    return torch.where(shifted == -torch.inf, -torch.inf, scaled)


def _prefill(model, prompt_ids: Tensor, prompt_mask: Tensor):
    """The prompts' cache and their last logits; a prompt shared by several rows is encoded once."""
    shared = shared_prompts(prompt_ids, prompt_mask)
    if shared is None:
        out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=position_ids_for(prompt_mask),
                    use_cache=True)
        return cache_of(out), out.logits[:, -1]
    first, rows = shared
    out = model(input_ids=prompt_ids[first], attention_mask=prompt_mask[first],
                position_ids=position_ids_for(prompt_mask[first]), use_cache=True)
    cache = cache_of(out)
    cache.batch_select_indices(rows)
    return cache, out.logits[rows, -1]


@swappable
@torch.no_grad()
def multi_turn(policy, tokenizer, envs: list, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int,
               max_tool_calls: int, do_sample: bool = True, top_p: float = 1.0,
               generator: torch.Generator | None = None) -> Trajectories:
    """Sample one trajectory per row against ``envs[row]`` (already reset), from left-padded prompts ``[B, P]``,
    within ``max_new_tokens`` tokens in all (the model's and the environment's)."""
    model, rows = policy.model, [_Row(env) for env in envs]
    with _eval_mode(model), policy.sampling_weights():
        cache, logits = _prefill(model, prompt_ids, prompt_mask)
        attention, position = prompt_mask.long(), position_ids_for(prompt_mask)[:, -1]
        for t in range(max_new_tokens):
            drawn, logp = _draw(logits, policy.temperature, top_p, do_sample, generator)
            tokens, attend = _advance(rows, drawn.tolist(), logp.tolist(), tokenizer, max_tool_calls,
                                      room=max_new_tokens - t - 1)
            if all(r.done for r in rows):
                break
            attention = torch.cat([attention, torch.tensor(attend, device=attention.device)[:, None]], dim=1)
            position = position + 1
            out = model(input_ids=torch.tensor(tokens, device=prompt_ids.device)[:, None], attention_mask=attention,
                        position_ids=position[:, None], use_cache=True, **with_cache(cache))
            cache, logits = cache_of(out), out.logits[:, -1]
    for r in rows:
        if not r.done:  # the budget ran out before an answer: none (a half-written turn is no answer)
            r.truncated = True
    completion, mask, attention_mask = trajectory_tensors([r.segments for r in rows], tokenizer.pad_token_id)
    sampling_logp = torch.zeros_like(mask)
    sampling_logp[mask.bool()] = torch.tensor([lp for r in rows for lp in r.logps])
    counts = {k: torch.tensor([getattr(r, k) for r in rows]) for k in ("calls", "failures", "turns")}
    device = prompt_ids.device
    return Trajectories(completion=completion.to(device), mask=mask.to(device),
                        attention_mask=attention_mask.to(device), sampling_logp=sampling_logp.to(device),
                        turn=turn_index(mask).to(device),
                        truncated=torch.tensor([r.truncated for r in rows]), tool_calls=counts["calls"],
                        tool_failures=counts["failures"], turns=counts["turns"],
                        answers=tokenizer.batch_decode([r.answer_ids for r in rows], skip_special_tokens=True))


def _advance(rows: list[_Row], drawn: list[int], logps: list[float], tokenizer, max_tool_calls: int,
             room: int) -> tuple[list[int], list[int]]:
    """Each row's token at this step and whether the model attends to it (pad: 0), as two columns."""
    tokens, attend = [], []
    for row, token, logp in zip(rows, drawn, logps):
        chosen = _next(row, token, logp, tokenizer, max_tool_calls, room)
        tokens.append(tokenizer.pad_token_id if chosen is None else chosen)
        attend.append(int(chosen is not None))
    return tokens, attend


def _next(row: _Row, drawn: int, logp: float, tokenizer, max_tool_calls: int, room: int) -> int | None:
    """The row's token at this step: None once done, else the environment's next queued token, else the model's
    draw (an EOS ends the model's turn)."""
    if row.done:
        return None
    if row.queue:
        token = row.queue.pop(0)
        row.add("env", token)
        return token
    row.add("model", drawn)
    row.logps.append(logp)
    row.turn_tokens.append(drawn)
    if drawn == tokenizer.eos_token_id:
        row.end_turn(tokenizer, max_tool_calls, room)
    return drawn


@swappable
def trajectory_tensors(trajectories: list[list[tuple[str, list[int]]]], pad_token_id: int
                       ) -> tuple[Tensor, Tensor, Tensor]:
    """The ``[B, T]`` rows of B trajectories, each a list of segments ``("model" | "env", token ids)`` in order,
    right-padded to the longest (T):

        completion      the segments' tokens one after another, then pad
        mask            1 on the model's tokens (its actions: the loss), 0 on the environment's and on pad
        attention_mask  1 on every token of a segment (the model reads them all), 0 on pad
    """
    T = max([sum(len(ids) for _, ids in segments) for segments in trajectories] + [1])
    completion = torch.full((len(trajectories), T), pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(trajectories), T)
    attention_mask = torch.zeros(len(trajectories), T)
    for b, segments in enumerate(trajectories):
        t = 0
        for kind, ids in segments:
            completion[b, t:t + len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[b, t:t + len(ids)] = float(kind == "model")
            attention_mask[b, t:t + len(ids)] = 1.0
            t += len(ids)
    return completion, mask, attention_mask


def turn_index(mask: Tensor) -> Tensor:
    """[B, T] the model turn each of the model's tokens belongs to, 0, 1, …; −1 on the environment's and on pad.
    A model turn is a run of mask-1 tokens (turns are separated by the environment's reply)."""
    starts = mask.bool() & ~torch.nn.functional.pad(mask.bool(), (1, 0))[:, :-1]
    return torch.where(mask.bool(), starts.long().cumsum(1) - 1, -1)
