"""The multi-turn rollout: the model writes a turn, the environment answers, the model goes on — in token ids,
on one key/value cache.

The prompts are encoded once (``policies.decode.prefill``: a prompt shared by rows, once). Then each step draws one
token for every row still going and feeds each row what it adds to its trajectory, in one forward on the cache:

    the model's token     sampled from π(· | everything so far) and recorded: mask 1 (an action: log-prob, KL,
                          entropy, advantage), attention 1
    + the environment's   where that token (EOS) ended a turn of tool calls: the whole reply, tokenized once and
      reply               fed in the same forward, as one chunk: mask 0 (context, not an action), attention 1

Rows feed chunks of different lengths, so each chunk is left-padded to the longest (pad: attention 0, read by no
one), which puts every row's last token at the chunk's last position: its logits are the next draw's. A row whose
trajectory has ended (an answer, a reply with no room, the budget) leaves the batch, its cache rows dropped. So the
trajectory is one ``[B, T]`` row with two masks, and each token — the model's or the environment's — goes through
the model at most once (the one that ends a trajectory is never fed): nothing is re-encoded when a turn begins,
and the model's own tokens are never decoded and re-tokenized into the sequence (decoding only reads them, to
parse a call).

A model turn ends at EOS (the template's end of turn). If it holds tool calls (``tool_calls.parse_tool_calls``),
each is run against the row's environment (in at most ``--max-tool-calls`` turns, TRL's count; a call in a later
turn, a malformed call, an unknown tool or a tool that raises, exits or runs past ``tool_calls.tool_time_limit`` is
answered with an error the model reads) and the chat template's rendering of the replies is fed; a turn without a
call is the answer and ends the trajectory. A reply that would not fit in the token budget ``max_new_tokens``
ends it too (truncated, as TRL drops such a reply), as does the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from ladder.core.swappable import swappable
from ladder.patches import cache_of, with_cache
from ladder.policies.causal_lm import _eval_mode, position_ids_for
from ladder.policies.decode import prefill
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
        self.queue: list[int] = []       # the environment's reply, to feed after the turn's EOS
        self.length = 0                  # tokens in the trajectory so far, the model's and the environment's
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
        self.length += 1

    def take(self, drawn: int, logp: float, tokenizer, max_tool_calls: int, max_new_tokens: int) -> list[int]:
        """The model's token: recorded, then what the row feeds next — the token and, where it ended a turn of
        calls, the environment's reply — or [] once the trajectory has ended (an answer, a reply with no room
        left to answer, the budget: the last two truncated)."""
        self.add("model", drawn)
        self.logps.append(logp)
        self.turn_tokens.append(drawn)
        if drawn == tokenizer.eos_token_id:
            self.end_turn(tokenizer, max_tool_calls, room=max_new_tokens - self.length)
        if not self.done and self.length >= max_new_tokens:
            self.done = self.truncated = True
        if self.done:
            return []
        reply, self.queue = self.queue, []
        for token in reply:
            self.add("env", token)
        return [drawn] + reply

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


@swappable
@torch.no_grad()
def multi_turn(policy, tokenizer, envs: list, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int,
               max_tool_calls: int, do_sample: bool = True, top_p: float = 1.0,
               generator: torch.Generator | None = None) -> Trajectories:
    """Sample one trajectory per row against ``envs[row]`` (already reset), from left-padded prompts ``[B, P]``,
    within ``max_new_tokens`` tokens in all (the model's and the environment's)."""
    model, rows, device = policy.model, [_Row(env) for env in envs], prompt_ids.device
    with _eval_mode(model), policy.sampling_weights():
        cache, logits = prefill(model, prompt_ids, prompt_mask)
        live = list(range(len(rows)))                        # the rows still going, in the cache's order
        attention, position = prompt_mask.long(), position_ids_for(prompt_mask)[:, -1]
        while True:
            drawn, logp = _draw(logits, policy.temperature, top_p, do_sample, generator)
            feeds = [rows[b].take(d, lp, tokenizer, max_tool_calls, max_new_tokens)
                     for b, d, lp in zip(live, drawn.tolist(), logp.tolist())]
            going = [i for i, feed in enumerate(feeds) if feed]
            if not going:
                break
            if len(going) < len(live):                       # ended rows leave the batch and the cache
                keep = torch.tensor(going, device=device)
                cache.batch_select_indices(keep)
                attention, position = attention[keep], position[keep]
                live, feeds = [live[i] for i in going], [feeds[i] for i in going]
            chunk, attend = left_padded(feeds, tokenizer.pad_token_id, device)
            attention = torch.cat([attention, attend], dim=1)
            positions = position[:, None] + attend.cumsum(1)    # each real token one past the last; pad unread
            position = positions[:, -1]
            out = model(input_ids=chunk, attention_mask=attention, position_ids=positions, use_cache=True,
                        logits_to_keep=1, **with_cache(cache))
            cache, logits = cache_of(out), out.logits[:, -1]
    return _trajectories(rows, tokenizer, device)


def left_padded(feeds: list[list[int]], pad_token_id: int, device) -> tuple[Tensor, Tensor]:
    """The rows' tokens to feed as one chunk ``[n, k]`` (k the longest), each left-padded, and its attention
    (1 on a row's tokens, 0 on pad): every row's last token sits at the last position."""
    k = max(len(feed) for feed in feeds)
    chunk = torch.tensor([[pad_token_id] * (k - len(f)) + f for f in feeds], device=device)
    attend = torch.tensor([[0] * (k - len(f)) + [1] * len(f) for f in feeds], device=device)
    return chunk, attend


def _trajectories(rows: list[_Row], tokenizer, device) -> Trajectories:
    """The rows' segments, log-probs and counts as ``Trajectories``."""
    completion, mask, attention_mask = trajectory_tensors([r.segments for r in rows], tokenizer.pad_token_id)
    sampling_logp = torch.zeros_like(mask)
    sampling_logp[mask.bool()] = torch.tensor([lp for r in rows for lp in r.logps])
    counts = {k: torch.tensor([getattr(r, k) for r in rows]) for k in ("calls", "failures", "turns")}
    return Trajectories(completion=completion.to(device), mask=mask.to(device),
                        attention_mask=attention_mask.to(device), sampling_logp=sampling_logp.to(device),
                        turn=turn_index(mask).to(device),
                        truncated=torch.tensor([r.truncated for r in rows]), tool_calls=counts["calls"],
                        tool_failures=counts["failures"], turns=counts["turns"],
                        answers=tokenizer.batch_decode([r.answer_ids for r in rows], skip_special_tokens=True))


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
