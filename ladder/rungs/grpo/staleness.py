"""The fifth policy, π_rollout: GRPO trained on rollouts that a lagging copy of the policy drew.

An asynchronous trainer samples the next batches while it trains on the last ones, so the batch of update u
was drawn by the policy as it was some updates earlier. ``--max-staleness k`` makes that lag exact and
deterministic, without threads: the rollout of update u is drawn by

    π_rollout = π_{θ_{max(0, u − k)}}          θ_j: the trainable weights at the start of update j

π_old stays the trainer's own forward at the start of update u (``old_logp`` is recomputed, not the
sampler's), so the clipped ratio π_θ/π_old is what it always was. The log-probs recorded while sampling
(``Rollout.sampling_logp``) are π_rollout's, so ``--sampler-correction`` weighs the policy term by
w = π_old/π_rollout (``ladder.core.off_policy``): the gap that k updates opened between the two.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor, nn

STAT = "sampling/staleness"  # the lag of the update's rollout, in updates: min(u, k)


class LaggingRollout:
    """Wraps a rollout callable ``rollout(step) -> (Rollout, rounds, generated)`` (``grpo.Step.rollout``) so
    that it samples with the weights of k updates ago; a checkpoint part.

    Each call is the start of an update u: a copy of the trainable weights θ_u (the parameters with
    ``requires_grad``: the LoRA adapter, or the whole model in full fine-tuning) joins a queue of the last
    k + 1 copies; the oldest, θ_{max(0, u − k)}, is loaded into the model, the wrapped rollout samples, and
    θ_u is put back bit for bit (also when the rollout raises). The rollout's ``stats`` gain
    ``sampling/staleness`` = u − max(0, u − k), logged as its mean. k = 0 is the wrapped rollout itself.
    """

    def __init__(self, rollout: Callable, policy: nn.Module, max_staleness: int):
        if max_staleness < 0:
            raise ValueError(f"max_staleness must be ≥ 0, got {max_staleness}")
        self.rollout, self.max_staleness = rollout, max_staleness
        self.params = {n: p for n, p in policy.named_parameters() if p.requires_grad}
        self.snapshots: deque[dict[str, Tensor]] = deque(maxlen=max_staleness + 1)  # θ_{u−k}, …, θ_u
        self.staleness = 0  # the last rollout's lag, in updates

    def __call__(self, step):
        if self.max_staleness == 0:
            return self.rollout(step)
        self.snapshots.append(self._copy())
        self.staleness = len(self.snapshots) - 1
        self._load(self.snapshots[0])        # π_rollout = π_{θ_{max(0, u − k)}}
        try:
            rollout, rounds, generated = self.rollout(step)
        finally:
            self._load(self.snapshots[-1])   # θ_u, bit for bit
        lag = torch.full((len(rollout),), float(self.staleness))
        return replace(rollout, stats={**(rollout.stats or {}), STAT: lag}), rounds, generated

    @torch.no_grad()
    def _copy(self) -> dict[str, Tensor]:
        return {n: p.detach().clone() for n, p in self.params.items()}

    @torch.no_grad()
    def _load(self, weights: dict[str, Tensor]) -> None:
        for n, p in self.params.items():
            p.copy_(weights[n])

    def state_dict(self) -> dict:
        return {"max_staleness": self.max_staleness, "snapshots": list(self.snapshots)}

    def load_state_dict(self, state: dict) -> None:
        """The saved queue (its newest k + 1 copies, if k changed); a queue of other weights is a KeyError or
        a ValueError, which ``--resume`` reports as a checkpoint of another run."""
        snapshots = []
        for saved in state["snapshots"]:
            if set(saved) != set(self.params):
                raise KeyError("the saved weights are not this model's trainable parameters")
            for n, p in self.params.items():
                if saved[n].shape != p.shape:
                    raise ValueError(f"{n}: saved {list(saved[n].shape)}, model {list(p.shape)}")
            snapshots.append({n: saved[n].to(p.device).clone() for n, p in self.params.items()})
        self.snapshots = deque(snapshots, maxlen=self.max_staleness + 1)
        self.staleness = max(len(self.snapshots) - 1, 0)
