"""The policy's entropy as a lever: which tokens the policy term trains, and an entropy bonus held near a target.

``high_entropy_mask`` keeps only the "forking" tokens — the share q of a batch's tokens where π_θ was least
sure ("Beyond the 80/20 rule", arXiv 2506.01939) — in the policy term. ``AdaptiveEntropyCoef`` moves the
bonus coefficient c_H after every optimiser step so that the entropy does not collapse below a target
(Skywork-OR1, arXiv 2505.22312). ``update.compute_loss`` applies both.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .swappable import swappable


@swappable
def high_entropy_mask(entropy: Tensor, mask: Tensor, keep: float) -> Tensor:
    """``[B, T]`` of 0/1: the real tokens whose entropy is in the top share ``keep`` = q of the batch's.

        h*     = quantile_{1−q}( H_t over the real tokens )      (linear interpolation, torch.quantile)
        keep_t = m_t · [H_t ≥ h*]

    q = 1 keeps every real token; q = 0 keeps the highest-entropy token (and its ties). A batch with no
    real token keeps none. The tokens at h* and above are where the sampled text could have gone another
    way; the rest are near-certain continuations whose gradient carries little signal.
    """
    real = mask.bool()
    if not real.any():
        return torch.zeros_like(mask)
    threshold = torch.quantile(entropy.detach()[real].float(), 1.0 - keep)
    return ((entropy.detach() >= threshold) & real).to(mask.dtype)


class AdaptiveEntropyCoef:
    """The entropy bonus's coefficient c_H, moved by a fixed step after each optimiser step (Skywork-OR1):

        H_k   = mean entropy of the tokens the bonus acted on at step k
        c_H  ← min(c_H + Δ, c_max)   if H_k ≤ H_target
        c_H  ← max(c_H − Δ, c_min)   otherwise

    and the bonus of step k + 1 is applied only while the entropy is at or below the target:
    ``applied()`` = c_H if H_k ≤ H_target else 0 (0 before the first step: no measurement yet). So the
    bonus switches on once the entropy has fallen to the target, grows while it stays there, and fades
    away when the entropy recovers. ``reduce`` sums (ΣH, count) over the data-parallel processes (None:
    one process). A checkpoint part (``state_dict``), so ``--resume`` continues with the same c_H.
    """

    def __init__(self, coef: float, target: float, coef_min: float = 0.0, coef_max: float = 1.0,
                 delta: float = 0.005, reduce: Callable[[Tensor], Tensor] | None = None):
        self.coef, self.target, self.coef_min, self.coef_max, self.delta = coef, target, coef_min, coef_max, delta
        self.reduce = reduce
        self.last_entropy = float("inf")

    def applied(self) -> float:
        """c_H of the next step's loss: c_H while the last measured entropy is at or below the target, else 0."""
        return self.coef if self.last_entropy <= self.target else 0.0

    def observe(self, entropy_sum: Tensor, count: Tensor) -> None:
        """After an optimiser step: H_k = ΣH / count over the tokens the bonus acted on (all processes), then c_H."""
        totals = torch.stack([entropy_sum.detach().float(), count.detach().float()])
        if self.reduce is not None:
            totals = self.reduce(totals)
        entropy = (totals[0] / totals[1].clamp(min=1.0)).item()
        if entropy <= self.target:
            self.coef = min(self.coef + self.delta, self.coef_max)
        else:
            self.coef = max(self.coef - self.delta, self.coef_min)
        self.last_entropy = entropy

    def state_dict(self) -> dict:
        return {"coef": self.coef, "last_entropy": self.last_entropy}

    def load_state_dict(self, state: dict) -> None:
        self.coef, self.last_entropy = state["coef"], state["last_entropy"]
