"""Moving the anchor: π_ref soft-refreshed towards π_θ (TRL's ``sync_ref_model``).

A fixed π_ref keeps the policy near where it started for the whole run. Refreshing it every N
updates lets the anchor follow the policy slowly, so the KL penalty limits how fast the policy
moves rather than how far it may ever go.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from .swappable import swappable


@swappable
@torch.no_grad()
def soft_update(reference: Iterable[Tensor], policy: Iterable[Tensor], alpha: float) -> None:
    """θ_ref ← α · θ + (1 − α) · θ_ref, parameter by parameter, in place.

    α = 1 copies π_θ into π_ref exactly; α = 0 leaves π_ref as it is. The mix is in parameter
    space, as TRL's ``ref_model_mixup_alpha`` is; with LoRA the parameters are the adapter's factors.
    """
    reference, policy = list(reference), list(policy)
    if len(reference) != len(policy):
        raise ValueError(f"{len(reference)} reference tensors for {len(policy)} policy tensors")
    for ref, theta in zip(reference, policy):
        ref.lerp_(theta.to(ref.dtype), alpha)  # lerp is exact at α = 0 and at α = 1
