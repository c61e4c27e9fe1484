"""The two preference objectives ``core.update`` can be given: a minibatch of pairs instead of sampled experience.

A preference batch holds P pairs as 2P rows, row 2i the chosen completion y_w of pair i and row 2i + 1 the rejected
one y_l (``Batch.rows_per_group = 2``: minibatching keeps each pair whole). Its advantages are zero: a pair has no
advantage, its preference is its order. The loss of a pair is one number, so the term puts the minibatch's mean
loss on every real token and the averaging aggregations return it unchanged:

    BradleyTerry  "bradley_terry"  L_BT  = −mean log σ(r(x, y_w) − r(x, y_l))                a reward model
    DPO           "dpo"            L_DPO = −mean log σ(β·[(log π_θ − log π_ref)(y_w) − (log π_θ − log π_ref)(y_l)])

A reward model is a "policy" with one decision per row (a ``[2P, 1]`` batch): its ``evaluate`` returns the score
r_φ(x, y) in the place of the log-prob. DPO reads log π_θ and log π_ref of every completion token and sums them
per row (``sequence_logp``). Both compute their loss with ``core.preferences`` (``bradley_terry_loss``,
``dpo_loss``: exercises 26 and 27) and their statistics with ``pair_statistics``.

The gradient of DPO shows what it is: with m = r̂_w − r̂_l the implicit rewards' margin,

    ∇L_DPO = −β·σ(−m)·[∇log π_θ(y_w|x) − ∇log π_θ(y_l|x)]

a policy gradient on fixed completions, with the advantage +β·σ(−m) on the chosen and −β·σ(−m) on the
rejected: large while π_θ still ranks the pair wrong, vanishing once it ranks it right by a margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from .objectives import PolicyInputs, objective
from .preferences import bradley_terry_loss, dpo_loss, implicit_reward, pair_statistics, sequence_logp

PAIR_AGGREGATIONS = ("token_mean", "seq_mean_token_mean")  # the averages, under which L on every token gives L


def pairs_of(per_row: Tensor) -> tuple[Tensor, Tensor]:
    """``[2P]`` per-row values → (``[P]`` of the chosen rows 0, 2, 4, …, ``[P]`` of the rejected rows 1, 3, 5, …)."""
    if per_row.shape[0] % 2:
        raise ValueError(f"a preference minibatch holds whole pairs: {per_row.shape[0]} rows is an odd number")
    return per_row[0::2], per_row[1::2]


def on_every_token(loss: Tensor, mask: Tensor, aggregation: str) -> Tensor:
    """The pairs' mean loss as a ``[2P, T]`` per-token term, which an averaging aggregation turns back into it."""
    if aggregation not in PAIR_AGGREGATIONS:
        raise ValueError(f"a preference loss is a mean over pairs: aggregation must be one of {PAIR_AGGREGATIONS}, "
                         f"got {aggregation!r}")
    return loss.expand(mask.shape)


@objective
@dataclass(frozen=True)
class BradleyTerry:
    """L_BT = −mean log σ(r(x, y_w) − r(x, y_l)); r = Σ_t mask·(what ``evaluate`` returned), the score of a
    ``[2P, 1]`` batch."""

    name: ClassVar[str] = "bradley_terry"
    folds_sampler_weight: ClassVar[bool] = False

    def scores(self, x: PolicyInputs) -> tuple[Tensor, Tensor]:
        return pairs_of(sequence_logp(x.logp, x.mask))

    def term(self, x: PolicyInputs, cfg) -> Tensor:
        return on_every_token(bradley_terry_loss(*self.scores(x)), x.mask, cfg.aggregation)

    def statistics(self, x: PolicyInputs, cfg) -> dict[str, Tensor]:
        """accuracy (pairs with r_w > r_l) and margin (mean r_w − r_l) of the minibatch."""
        return pair_statistics(*self.scores(x))


@objective
@dataclass(frozen=True)
class DPO:
    """L_DPO = −mean log σ(r̂_w − r̂_l) with r̂(x, y) = β·Σ_t (log π_θ − log π_ref)(y_t | x, y_<t)."""

    name: ClassVar[str] = "dpo"
    folds_sampler_weight: ClassVar[bool] = False
    beta: float = 0.1            # β: the KL-regularised objective's coefficient, the implicit reward's scale

    def sequence_logps(self, x: PolicyInputs) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(log π_θ(y_w), log π_θ(y_l), log π_ref(y_w), log π_ref(y_l)), each ``[P]``."""
        if x.ref_logp is None:
            raise ValueError("DPO compares π_θ with π_ref: the batch needs ref_logp")
        chosen, rejected = pairs_of(sequence_logp(x.logp, x.mask))
        ref_chosen, ref_rejected = pairs_of(sequence_logp(x.ref_logp, x.mask))
        return chosen, rejected, ref_chosen, ref_rejected

    def term(self, x: PolicyInputs, cfg) -> Tensor:
        return on_every_token(dpo_loss(*self.sequence_logps(x), self.beta), x.mask, cfg.aggregation)

    def statistics(self, x: PolicyInputs, cfg) -> dict[str, Tensor]:
        """TRL's DPOTrainer names: rewards/chosen, rewards/rejected (the implicit rewards' means),
        rewards/accuracies, rewards/margins, and logps/chosen, logps/rejected (the means of log π_θ(y_w), log π_θ(y_l)
        summed over each completion: both falling while the margin grows is likelihood displacement)."""
        with torch.no_grad():
            chosen, rejected, ref_chosen, ref_rejected = self.sequence_logps(x)
            chosen_reward = implicit_reward(chosen, ref_chosen, self.beta)
            rejected_reward = implicit_reward(rejected, ref_rejected, self.beta)
        paired = pair_statistics(chosen_reward, rejected_reward)
        return {"rewards/chosen": chosen_reward.mean(), "rewards/rejected": rejected_reward.mean(),
                "rewards/accuracies": paired["accuracy"], "rewards/margins": paired["margin"],
                "logps/chosen": chosen.mean(), "logps/rejected": rejected.mean()}
