"""Solution to exercise 10 — Â_i = (r_i − mean(r_group)) / (std + ε)."""

from __future__ import annotations

from torch import Tensor


def group_relative(rewards: Tensor, group_size: int, scale: str = "group", eps: float = 1e-4) -> Tensor:
    """Â_i = (r_i − mean of its group) / (std + ε)."""
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2, got {group_size}")
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not form groups of {group_size}")
    grouped = rewards.view(-1, group_size)                          # one group per row
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "none":                                             # Dr. GRPO: centre only
        return centred.reshape(-1)
    if scale == "group":
        std = grouped.std(dim=1, keepdim=True)                      # sample std (n − 1) of each group
    elif scale == "batch":
        std = rewards.std()
    else:
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    return (centred / (std + eps)).reshape(-1)                      # equal rewards: 0 / ε = 0
