"""Solution to exercise 15 — θ_ref ← α · θ + (1 − α) · θ_ref, in place."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor


@torch.no_grad()                                                # parameters: change them outside the autograd graph
def soft_update(reference: Iterable[Tensor], policy: Iterable[Tensor], alpha: float) -> None:
    """θ_ref ← α · θ + (1 − α) · θ_ref for each pair of tensors, in place."""
    reference, policy = list(reference), list(policy)
    if len(reference) != len(policy):
        raise ValueError(f"{len(reference)} reference tensors for {len(policy)} policy tensors")
    for ref, theta in zip(reference, policy):
        ref.lerp_(theta.to(ref.dtype), alpha)                   # exact at α = 0 and at α = 1: for α ≥ 0.5
                                                                # lerp_ computes θ − (1 − α)(θ − θ_ref)
