"""Solution to exercise 22 — a list of turns as one row with two masks: the loss mask and the attention mask."""

from __future__ import annotations

import torch
from torch import Tensor


def trajectory_tensors(trajectories: list[list[tuple[str, list[int]]]], pad_token_id: int
                       ) -> tuple[Tensor, Tensor, Tensor]:
    """(completion, mask, attention_mask), each [B, T]: the segments one after another, right-padded."""
    lengths = [sum(len(ids) for _, ids in segments) for segments in trajectories]
    T = max(lengths + [1])                                               # at least one column
    completion = torch.full((len(trajectories), T), pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(trajectories), T)
    attention_mask = torch.zeros(len(trajectories), T)
    for b, segments in enumerate(trajectories):
        start = 0
        for kind, ids in segments:
            end = start + len(ids)
            completion[b, start:end] = torch.tensor(ids, dtype=torch.long)
            mask[b, start:end] = 1.0 if kind == "model" else 0.0           # the model's tokens are its actions
            attention_mask[b, start:end] = 1.0                             # every token is read, the env's too
            start = end
    return completion, mask, attention_mask
