"""Experience as padded ``[B, T]`` tensors.

A row is one trajectory (a CartPole rollout segment, a sampled completion); a column is one
decision (a push, a token). ``mask[b, t] = 1`` marks a real action, 0 marks padding.

Two masks: ``mask`` says which positions are the policy's actions (only they carry a log-prob term,
a KL term, an entropy and an advantage); ``attention_mask`` says which positions the policy reads.
A multi-turn trajectory holds tokens it reads but did not choose — a tool's output, an environment's
reply — with attention 1 and mask 0. Without an ``attention_mask`` the two coincide.

Every per-action field is ``[B, T]``. ``inputs`` holds whatever the policy needs to recompute
log π_θ(a_t | s_t) for those actions (observations ``[B, T, obs_dim]`` for an MLP, token ids and
attention masks for a language model); the core never looks inside it except to select rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace

import torch
from torch import Tensor


@dataclass
class Batch:
    """One batch of experience.

    actions    [B, T]  the actions a_t that were taken
    mask       [B, T]  1 for real actions, 0 for padding (and for context the policy did not choose)
    old_logp   [B, T]  log π_old(a_t|s_t), recorded when the batch was sampled (None: take
                       log π_θ detached on the first pass, i.e. μ = 1 without an extra forward)
    ref_logp   [B, T]  log π_ref(a_t|s_t) of the frozen anchor (None: no KL to π_ref)
    sampling_logp [B, T]  log π_sampler(a_t|s_t), recorded by the sampler that drew the batch when it
                       is not π_old (a lower precision, another engine; None: π_old drew it)
    values     [B, T]  V_old(s_t) from the critic at sampling time (None: no critic)
    rewards    [B, T]  per-step rewards r_t
    advantages [B, T]  Â_t
    returns    [B, T]  value targets R_t
    inputs     dict    policy inputs, each a tensor whose first dimension is B
    attention_mask [B, T]  1 where the policy reads the token: its actions and the context it did not
                       choose (a tool's or an environment's reply); 0 for padding (None: ``mask``)
    rows_per_group     rows come in consecutive groups that minibatching keeps together: 2 for preference
                       pairs (row 2i the chosen completion, row 2i + 1 the rejected one); 1: every row alone
    """

    actions: Tensor
    mask: Tensor
    advantages: Tensor | None = None
    old_logp: Tensor | None = None
    ref_logp: Tensor | None = None
    sampling_logp: Tensor | None = None
    values: Tensor | None = None
    rewards: Tensor | None = None
    returns: Tensor | None = None
    inputs: dict = field(default_factory=dict)
    attention_mask: Tensor | None = None
    rows_per_group: int = 1

    def __post_init__(self):
        if self.attention_mask is not None and self.attention_mask.shape != self.mask.shape:
            raise ValueError(f"attention_mask {list(self.attention_mask.shape)} and mask {list(self.mask.shape)} "
                             "must both be [B, T]")

    def __len__(self) -> int:
        return self.actions.shape[0]

    @property
    def num_tokens(self) -> int:
        """Number of real (unpadded) actions in the batch."""
        return int(self.mask.sum().item())

    def select(self, rows: Tensor) -> Batch:
        """The sub-batch made of the given rows (an index tensor over B)."""
        picked = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "inputs":
                picked[f.name] = {k: v[rows] for k, v in value.items()}
            elif isinstance(value, Tensor):
                picked[f.name] = value[rows]
        return replace(self, **picked)

    def minibatches(self, num_minibatches: int, generator: torch.Generator | None = None
                    ) -> Iterator[Batch]:
        """Shuffle the groups of ``rows_per_group`` rows and yield ``num_minibatches`` equal sub-batches, each
        group whole and in its order."""
        B, G = len(self), self.rows_per_group
        if B % G:
            raise ValueError(f"batch of {B} rows is not made of whole groups of {G}")
        if num_minibatches < 1 or (B // G) % num_minibatches:
            what = f"{B} rows" if G == 1 else f"{B // G} groups of {G} rows"
            raise ValueError(f"batch of {what} cannot be split into {num_minibatches} equal minibatches")
        order = torch.randperm(B // G, generator=generator)
        rows = (order[:, None] * G + torch.arange(G)).reshape(-1)
        for part in rows.view(num_minibatches, B // num_minibatches):
            yield self.select(part)

    def as_transitions(self) -> Batch:
        """Flatten ``[B, T]`` into ``[B·T, 1]``: every action becomes its own row.

        Once advantages are computed, a control rollout no longer needs its time axis; shuffling
        single transitions (as CleanRL and SB3 do) decorrelates the minibatches.
        """
        B, T = self.actions.shape
        if self.rows_per_group != 1:
            raise ValueError("a batch of row groups (preference pairs) has no transitions to flatten")

        def flat(x: Tensor) -> Tensor:
            return x.reshape(B * T, 1, *x.shape[2:])

        out = {f.name: flat(getattr(self, f.name)) for f in fields(self)
               if isinstance(getattr(self, f.name), Tensor)}
        out["inputs"] = {k: flat(v) for k, v in self.inputs.items()}
        return replace(self, **out)


def last_step_mask(mask: Tensor) -> Tensor:
    """[B, T] one-hot of each row's last real action (all zeros for an empty row).

    For right-padded rows this marks where a trajectory ends: the terminal step of an episode,
    the last token of a completion (where a sequence-level score is placed).
    """
    T = mask.shape[1]
    positions = torch.arange(T, device=mask.device).expand_as(mask)
    last = torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values
    return (positions == last[:, None]).to(mask.dtype) * mask
