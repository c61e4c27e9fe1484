"""Solution to exercise 13 — Â_i = r_i − (1/(G−1)) Σ_{j≠i} r_j."""

from __future__ import annotations

from torch import Tensor


def leave_one_out(rewards: Tensor, group_size: int, scale: str = "none", eps: float = 1e-4) -> Tensor:
    """Â_i = r_i − the mean reward of the other G − 1 completions of its prompt."""
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2, got {group_size}")
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not form groups of {group_size}")
    grouped = rewards.view(-1, group_size)                                      # one group per row
    baseline = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)  # the others' mean
    advantages = (grouped - baseline).reshape(-1)
    if scale == "batch":
        return (advantages - advantages.mean()) / (advantages.std() + eps)     # sample std; all equal: 0 / ε
    if scale != "none":
        raise ValueError(f"scale must be 'none' or 'batch' for leave-one-out, got {scale!r}")
    return advantages
