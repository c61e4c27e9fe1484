"""Solution to exercise 23 — the multi-turn rollout: the model's turns and the environment's replies, in token ids,
on one key/value cache."""

from __future__ import annotations

import torch
from ex22_trajectory_tensors import trajectory_tensors
from torch import Tensor

from ladder.patches import cache_of, with_cache
from ladder.policies.causal_lm import position_ids_for
from ladder.rungs.agent.rollout import Trajectories, turn_index
from ladder.tasks import tool_calls


class Row:
    """One trajectory while it is sampled: its segments, the replies still to feed, its counts."""

    def __init__(self, env):
        self.tools = tool_calls.tools_of(env)
        self.segments: list[tuple[str, list[int]]] = []   # ("model" | "env", ids), in order
        self.logps: list[float] = []                      # log π of each of the model's tokens, as drawn
        self.queue: list[int] = []                        # the environment's reply, fed after the turn's EOS
        self.length = 0                                   # tokens so far, the model's and the environment's
        self.turn: list[int] = []                         # the model's current turn
        self.answer: list[int] = []                       # the answer (a turn without a call), without its EOS
        self.turns = self.calls = self.failures = self.calling_turns = 0   # turns: those ended by EOS
        self.done = self.truncated = False

    def add(self, kind: str, token: int) -> None:
        if not self.segments or self.segments[-1][0] != kind:
            self.segments.append((kind, []))
        self.segments[-1][1].append(token)
        self.length += 1

    def end_turn(self, tokenizer, max_tool_calls: int, room: int) -> None:
        """EOS: a turn without a call is the answer; calls are run and their rendered replies queued."""
        text = tokenizer.decode(self.turn[:-1], skip_special_tokens=False)  # read only, to find the calls
        calls = tool_calls.parse_tool_calls(text)
        if not calls:
            self.answer = self.turn[:-1]
        self.turn = []
        self.turns += 1
        if not calls:
            self.done = True
            return
        replies, self.calling_turns = [], self.calling_turns + 1
        for call in calls:
            self.calls += 1
            if self.calling_turns > max_tool_calls:                        # the budget counts calling turns
                reply, failed = tool_calls.over_budget(call, max_tool_calls), True
            else:
                reply, failed = tool_calls.call_tool(self.tools, call)     # an error comes back as text
            replies.append(reply)
            self.failures += failed
        suffix = tool_calls.suffix_ids(tokenizer, replies)                 # the template's rendering, tokenized once
        if len(suffix) >= room:                                            # no room to read it and answer
            self.done = self.truncated = True
        else:
            self.queue = suffix

    def take(self, drawn: int, logp: float, tokenizer, max_tool_calls: int, max_new_tokens: int) -> list[int]:
        """The model's token, recorded; then what the row feeds next: the token, and after a turn of calls the
        whole reply with it — or [] once the trajectory has ended (an answer, no room for the reply, the budget)."""
        self.add("model", drawn)
        self.logps.append(logp)
        self.turn.append(drawn)
        if drawn == tokenizer.eos_token_id:
            self.end_turn(tokenizer, max_tool_calls, room=max_new_tokens - self.length)
        if not self.done and self.length >= max_new_tokens:                # the budget: no answer
            self.done = self.truncated = True
        if self.done:
            return []
        reply, self.queue = self.queue, []
        for token in reply:
            self.add("env", token)
        return [drawn] + reply


def draw(logits: Tensor, temperature: float, top_p: float, do_sample: bool, generator) -> tuple[Tensor, Tensor]:
    """(tokens [B], log q(token) [B]) from q = softmax(z / τ), top-p's cut renormalised when sampling."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    if not do_sample:
        tokens = logp.argmax(-1)
    else:
        weights = logp.exp()
        if top_p < 1.0:
            sorted_p, order = weights.sort(dim=-1, descending=True)
            dropped = sorted_p.cumsum(-1) - sorted_p > top_p
            weights = weights.scatter(1, order, sorted_p.masked_fill(dropped, 0.0))
            logp = torch.log(weights / weights.sum(-1, keepdim=True))      # log q = log p − log Z on the nucleus
        tokens = torch.multinomial(weights, 1, generator=generator).squeeze(1)
    return tokens, logp.gather(1, tokens[:, None]).squeeze(1)


@torch.no_grad()
def multi_turn(policy, tokenizer, envs: list, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int,
               max_tool_calls: int, do_sample: bool = True, top_p: float = 1.0,
               generator: torch.Generator | None = None) -> Trajectories:
    """One trajectory per row against ``envs[row]``, within ``max_new_tokens`` tokens in all."""
    model, rows, device = policy.model, [Row(env) for env in envs], prompt_ids.device
    was_training = model.training
    model.eval()
    with policy.sampling_weights():
        out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=position_ids_for(prompt_mask),
                    use_cache=True)                                        # the prompts, once
        cache, logits = cache_of(out), out.logits[:, -1]
        live = list(range(len(rows)))                                      # the rows still going, in cache order
        attention, position = prompt_mask.long(), position_ids_for(prompt_mask)[:, -1]
        while True:
            drawn, logp = draw(logits, policy.temperature, top_p, do_sample, generator)
            feeds = [rows[b].take(d, lp, tokenizer, max_tool_calls, max_new_tokens)
                     for b, d, lp in zip(live, drawn.tolist(), logp.tolist())]
            going = [i for i, feed in enumerate(feeds) if feed]
            if not going:
                break
            if len(going) < len(live):                                     # ended rows leave, cache and all
                keep = torch.tensor(going, device=device)
                cache.batch_select_indices(keep)
                attention, position = attention[keep], position[keep]
                live, feeds = [live[i] for i in going], [feeds[i] for i in going]
            k = max(len(feed) for feed in feeds)                           # one chunk, each row left-padded
            chunk = torch.tensor([[tokenizer.pad_token_id] * (k - len(f)) + f for f in feeds], device=device)
            attend = torch.tensor([[0] * (k - len(f)) + [1] * len(f) for f in feeds], device=device)
            attention = torch.cat([attention, attend], dim=1)
            positions = position[:, None] + attend.cumsum(1)               # pad is not read: its position is moot
            position = positions[:, -1]
            out = model(input_ids=chunk, attention_mask=attention, position_ids=positions, use_cache=True,
                        **with_cache(cache))                               # each row's last token at the end
            cache, logits = cache_of(out), out.logits[:, -1]
    model.train(was_training)
    completion, mask, attention_mask = trajectory_tensors([row.segments for row in rows], tokenizer.pad_token_id)
    sampling_logp = torch.zeros_like(mask)
    sampling_logp[mask.bool()] = torch.tensor([lp for row in rows for lp in row.logps])
    return Trajectories(completion=completion.to(device), mask=mask, attention_mask=attention_mask,
                        sampling_logp=sampling_logp, turn=turn_index(mask),
                        truncated=torch.tensor([row.truncated for row in rows]),
                        tool_calls=torch.tensor([row.calls for row in rows]),
                        tool_failures=torch.tensor([row.failures for row in rows]),
                        turns=torch.tensor([row.turns for row in rows]),
                        answers=tokenizer.batch_decode([row.answer for row in rows], skip_special_tokens=True))
