"""Exercise 15 — a moving anchor: π_ref soft-updated towards π_θ (TRL's sync_ref_model; --ref-sync-every).

Goes with notebook 6, section “5 · The map: TRL's names → ladder's options → core functions”.

A fixed π_ref holds the policy near where it started for the whole run. Refreshing it every N
updates lets the anchor follow the policy slowly: the KL penalty then limits how fast the policy
moves, not how far it may ever go. The mix is in parameter space, tensor by tensor:

    θ_ref ← α · θ + (1 − α) · θ_ref

    reference  list of tensors  π_ref's parameters, any shapes (a bias [N], a weight [N, M], a LoRA
                                factor …): changed in place
    policy     list of tensors  π_θ's parameters, in the same order and shapes: left as they are
    alpha      float            α in [0, 1]
    result     None

α = 0 leaves π_ref as it is, α = 1 copies π_θ exactly — even where the two are far apart:
θ_ref + α·(θ − θ_ref) is not exact at α = 1 (in float32, 1e8 + (1 − 1e8) is 0, not 1).
Two lists of different lengths raise ValueError (``zip`` would quietly stop at the shorter).
θ is cast to π_ref's dtype (π_ref may be kept in another precision). A model's parameters require
grad: change them under ``torch.no_grad()``, so that π_ref never joins the autograd graph.

Worked example, α = 0.25: each reference tensor moves a quarter of the way towards the policy's.

    >>> reference = [torch.tensor([[0., 1.], [2., 3.]]), torch.tensor([4.])]
    >>> soft_update(reference, [torch.tensor([[1., 1.], [0., 3.]]), torch.tensor([0.])], alpha=0.25)
    >>> reference
    [tensor([[0.2500, 1.0000],
            [1.5000, 3.0000]]), tensor([3.])]

α = 1 from far away: π_ref becomes π_θ exactly (θ_ref + α·(θ − θ_ref) would give 0 and 0; the grader
has this case).

    >>> reference = [torch.tensor([1e8, -3e7])]
    >>> soft_update(reference, [torch.tensor([1.0, 0.3])], alpha=1.0)
    >>> reference
    [tensor([1.0000, 0.3000])]

Hint: ``Tensor.lerp_(end, weight)`` sets self, in place, to self + weight · (end − self) — that is its
value, not how PyTorch computes it: for weight < 0.5 it computes self + weight · (end − self), for
weight ≥ 0.5 end − (1 − weight) · (end − self). So weight 0 gives self and weight 1 gives end exactly
(as long as end − self is finite); the formula written out by hand is exact at 0, not at 1.
Mirrors ``ladder.core.soft_update``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run ppo-sentiment --preset tiny --ref-sync-every 2 --use-exercises`` trains with it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch  # noqa: F401 - you will need it
from torch import Tensor


def soft_update(reference: Iterable[Tensor], policy: Iterable[Tensor], alpha: float) -> None:
    """θ_ref ← α · θ + (1 − α) · θ_ref for each pair of tensors, in place."""
    raise NotImplementedError
