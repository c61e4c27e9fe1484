"""Exercise 23 — the multi-turn rollout: the model writes, the environment answers, on one cache.

Goes with notebook 7, section “2 · The rollout: turn after turn, on one cache”.

The agent rung samples trajectories, not completions: the model writes a turn, which may call tools;
the environment runs them and its reply is read; the model writes again; until a turn without a call
(the answer) or the budget. Encode the prompts once; then each step draws one token for every row still
going and feeds, in one forward on the cache, what each row adds to its trajectory:

    the model's token    draw x ~ q = softmax(z / τ) (top-p < 1: cut to the nucleus, renormalised), record
                         log q(x): mask 1, attention 1. Draw with ``torch.multinomial(q, 1, generator=generator)``
                         over the rows still going, in their order; ``do_sample=False``: x = argmax, log q(x)
    + the reply          where x (EOS) ended a turn of calls: the environment's whole reply, fed with x in
                         the same forward: mask 0, attention 1 (context, not an action — exercise 22)

The rows' feeds differ in length (1, or 1 + a reply's), so left-pad each to the longest (pad: attention 0):
every row's last token then sits at the chunk's last position, whose logits are its next draw. The pads live
only in that forward's input and attention mask, never in ``completion``. A row whose trajectory has ended leaves
the batch: keep the rows still going (``cache.batch_select_indices(kept)``, in place, and the same rows of the
attention mask and positions), so no forward runs on a finished row. The token that ends a trajectory is never
fed: nothing is drawn after it.

A turn ends at EOS (``tokenizer.eos_token_id``, the template's end of turn). Then decode the turn (to read
it, never to rebuild the sequence), ``tool_calls.parse_tool_calls(text)``: no call → the turn is the answer
and the trajectory ends; else run each call, ``tool_calls.call_tool(tools, call)`` with ``tools =
tool_calls.tools_of(env)`` (a malformed call, an unknown tool, a tool that raises: an error message, never an
exception); then feed ``tool_calls.suffix_ids(tokenizer, replies)``, the chat template's rendering of the
replies and the next assistant header, tokenized once, after x in this step's chunk. If that reply does not
leave room for a token of answer within ``max_new_tokens`` — ``len(suffix) >= max_new_tokens − n``, n the tokens
the row holds after x (its turns and replies so far, prompt excluded) — drop it: the trajectory ends there,
truncated (as TRL drops it); its calls were run and count, only the reply is dropped. With max_new_tokens = 20 and
n = 12, a reply of 7 tokens is fed (12 + 7 + 1 ≤ 20), one of 8 is dropped. The budget counts every token, the
model's and the environment's: a row whose n reaches ``max_new_tokens`` has ended. If it was still in a turn, it is
truncated and has no answer: a half-written turn (or a last turn of calls) is not one, and its answer is "" (a
reward must not score a number it happened to write). An answer whose EOS is the last token of the budget is an
answer, not truncated.

``max_tool_calls`` counts the model's turns that call tools, not the calls (TRL's ``max_tool_calling_iterations``;
a turn may hold several calls). In the first ``max_tool_calls`` calling turns every call is run; in a calling turn
past them, every call is answered with ``tool_calls.over_budget(call, max_tool_calls)`` instead of run, and the
model reads that error and goes on (TRL ends the trajectory there instead). With ``max_tool_calls = 1``, a turn of
two calls, another turn of two calls, then an answer: the first turn's two calls run, the second's two get the
error. The counts, per row:

    turns           the model's turns that ended with EOS (an answer, or a turn of calls — its reply dropped
                    for want of room included); a turn cut off by the token budget does not count
    tool_calls      every call made, run or not (past the budget included)
    tool_failures   the calls answered with an error: a malformed call, an unknown tool, a tool that raises,
                    and every call past the budget

The pitfalls, each a property the grader checks:

    * one cache: the prompts are encoded once, then each step feeds each row's new tokens on the cache —
      re-encoding the trajectory costs O(T²) at every step (O(K·T) at each of K turns) and is not what was
      sampled; a reply goes in whole, in the forward that feeds the EOS before it (none of its own, not one
      per token), and an ended row is in no forward
    * the model's tokens as drawn: decoding a turn and encoding the text again gives other ids (BPE merges
      differ); the trajectory holds the ids that were drawn, whose log-probs were recorded
    * the environment's tokens are fed with attention 1, or the next turn is sampled without reading the
      reply while training reads it: at top_p = 1, log q recorded as drawn must equal one forward over the
      whole row (under top_p < 1 it is that minus log of the nucleus's mass)
    * positions skip the left padding (``position_ids_for(prompt_mask)``), then + 1 per token a row reads
      (a chunk's pad is read by no one: its position does not matter)
    * ``log_softmax(z / τ)`` with ``τ = policy.temperature``, as the loss will compute it (then the nucleus)

    policy          .model (a causal LM: input_ids, attention_mask, position_ids, use_cache, and the cache —
                    ``ladder.patches.with_cache(cache)`` / ``cache_of(output)``), .temperature, and
                    .sampling_weights() (a context to sample in)
    envs            one environment per row, already reset (TRL's protocol: its public methods are tools)
    prompt_ids      [B, P] left-padded, with prompt_mask [B, P]
    result          ``ladder.rungs.agent.rollout.Trajectories``: completion, mask, attention_mask,
                    sampling_logp [B, T] (exercise 22 makes the first three from each row's segments; log π
                    of the model's tokens, 0 elsewhere), turn = ``turn_index(mask)``, and per row: truncated,
                    tool_calls, tool_failures, turns (the counts above), answers (the answer's text — the turn
                    without a call, EOS and special tokens left out; "" if truncated: what the rewards read)

Worked example: a small random model whose turns are scripted (the grader's, ``agent_harness``): it calls
``multiply(3, 4)``, spelt one character a token (its markers ``<tool_call>`` and ``</tool_call>`` one token each:
56 tokens with its EOS), reads the reply (15 tokens), answers
``#### 12`` (8 tokens):

    >>> from ladder.graders.cases_agent import segments, worked_example
    >>> trajectories = worked_example(multi_turn)
    >>> segments(trajectories)
    [('model', 56), ('env', 15), ('model', 8)]
    >>> trajectories.turns, trajectories.tool_calls, trajectories.truncated, trajectories.answers
    (tensor([2]), tensor([1]), tensor([False]), ['#### 12'])

Mirrors ``ladder.rungs.agent.rollout.multi_turn``. Grade it: ``pytest exercises/`` (property by property, each
case naming its property, then the same trajectories as the rung's on the same script); once it passes,
``python -m ladder.run agent --preset tiny --use-exercises`` samples with it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ladder.patches import cache_of, with_cache  # noqa: F401 - you will need them
from ladder.policies.causal_lm import position_ids_for  # noqa: F401 - you will need it
from ladder.rungs.agent.rollout import Trajectories, turn_index  # noqa: F401 - you will need them
from ladder.tasks import tool_calls  # noqa: F401 - you will need it


@torch.no_grad()
def multi_turn(policy, tokenizer, envs: list, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int,
               max_tool_calls: int, do_sample: bool = True, top_p: float = 1.0,
               generator: torch.Generator | None = None) -> Trajectories:
    """One trajectory per row against ``envs[row]``, within ``max_new_tokens`` tokens in all."""
    raise NotImplementedError
