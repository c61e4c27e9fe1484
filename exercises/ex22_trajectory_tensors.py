"""Exercise 22 — two masks from a list of turns: what the model wrote, what it read.

Goes with notebook 7, section “1 · One trajectory, two masks”.

An agent's trajectory is not one completion but turns: the model writes (a tool call), the environment
answers (the tool's reply, wrapped in the chat template's markers), the model writes again (the answer).
The agent rung keeps it as one ``[B, T]`` row of token ids, like a completion, with two masks instead of one:

    attention_mask[b, t] = 1  if token t is in a segment (the model's or the environment's), 0 on pad
    mask[b, t]           = 1  if token t is in a "model" segment, 0 on the environment's tokens and on pad

The environment's tokens are **context**: the model reads them before its next turn, so they must be in
the forward (attention 1) or the log-probs of the next turn are of another sequence than the one sampled.
They are **not actions**: the policy did not choose them, so they get no log-prob term, no KL, no
entropy and no advantage (mask 0). Trained on (mask 1), the model would be pushed to write the tool's
replies itself — to hallucinate results instead of calling the tool (the rung's ``--train-env-tokens``
shows it). Kept out of the forward (attention 0), the answer's log-probs at training would be computed
as if the reply had never come, unlike the sampler's.

    trajectories     B lists of segments ``(kind, ids)`` in order, kind "model" or "env", ids a list of ints
    pad_token_id     int: what fills a row after its last token
    completion       [B, T] torch.long, the segments' ids one after another, then pad (T: the longest row,
                     at least 1)
    mask             [B, T] float
    attention_mask   [B, T] float

Worked example: the model calls a tool (ids 5, 6 and its end of turn 2), the environment replies (7, 8),
the model answers (9, 2); a second trajectory answers at once (4, 2) and is padded with 0:

    >>> M, E = "model", "env"
    >>> completion, mask, attention = trajectory_tensors([[(M, [5, 6, 2]), (E, [7, 8]), (M, [9, 2])],
    ...                                                   [(M, [4, 2])]], pad_token_id=0)
    >>> completion
    tensor([[5, 6, 2, 7, 8, 9, 2],
            [4, 2, 0, 0, 0, 0, 0]])
    >>> mask
    tensor([[1., 1., 1., 0., 0., 1., 1.],
            [1., 1., 0., 0., 0., 0., 0.]])
    >>> attention
    tensor([[1., 1., 1., 1., 1., 1., 1.],
            [1., 1., 0., 0., 0., 0., 0.]])

``attention − mask`` is 1 exactly on the environment's tokens (the rung logs their count,
``agent/env_tokens``). The rung's ``grpo_step`` passes both to ``lm_batch``: ``mask`` is the loss mask,
``attention_mask`` what the forward reads (exercise 20).

Mirrors ``ladder.rungs.agent.rollout.trajectory_tensors``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run agent --preset tiny --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def trajectory_tensors(trajectories: list[list[tuple[str, list[int]]]], pad_token_id: int
                       ) -> tuple[Tensor, Tensor, Tensor]:
    """(completion, mask, attention_mask), each [B, T]: the segments one after another, right-padded."""
    raise NotImplementedError
