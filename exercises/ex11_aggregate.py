"""Exercise 11 — from per-action losses to one number: masked aggregation (GRPO, Dr. GRPO, DAPO, LUSPO).

Goes with notebook 5, section “KL in the loss, and how the loss is averaged”.

Every loss so far is ``[B, T]``, one value per action, and padding must not count. How to average
is a real design choice: it decides how much a long completion weighs against a short one.

    token_mean           Σ m·x / Σ m                   every real action counts once
    seq_mean_token_mean  (1/B) Σ_b [Σ_t m·x / Σ_t m]   GRPO: every sequence counts once
                                                       (an empty row contributes 0, still counts in B)
    seq_mean_token_sum   (1/B) Σ_b Σ_t m·x             LUSPO: each sequence's sum, a long one weighs more
    sum_over_constant    Σ m·x / max(num_tokens, 1)    a constant the caller computes, no length bias:
                                                       Dr. GRPO's generation budget B · L_max, or
                                                       DAPO's real-token count of the whole update
                                                       (every minibatch, every process), this
                                                       minibatch's share of it

Any other mode is a mistake: raise ValueError.

    per_action  [B, T]  the loss per action (padding may hold anything, even inf or nan)
    mask        [B, T]  1 for real actions
    mode        str     one of the four above (anything else: ValueError)
    num_tokens  float   sum_over_constant's constant (divide by at least 1); required there (None:
                        raise ValueError), ignored by the other three
    result      []      a scalar tensor, with gradient

Careful: inf · 0 is nan. Select the real entries (``torch.where``) rather than multiplying by the mask,
and never divide by 0 (a row or a batch without real actions: it contributes 0).

    >>> x = torch.tensor([[1., 2., 3.], [4., 99., 99.]]); m = torch.tensor([[1., 1., 1.], [1., 0., 0.]])
    >>> modes = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum")
    >>> [round(aggregate(x, m, mode).item(), 4) for mode in modes]
    [2.5, 3.0, 5.0]

DAPO: say this minibatch is one of M = 2 minibatches of an update that holds 8 real tokens (every
minibatch, on one process). The caller passes this minibatch's share of them, 8 / M = 4, and the
sum of its real losses, 1 + 2 + 3 + 4 = 10, is divided by it:

    >>> aggregate(x, m, "sum_over_constant", num_tokens=8.0 / 2)
    tensor(2.5000)

With a budget of L_max = 5 new tokens per completion, Dr. GRPO divides by B · L_max = 2 · 5 = 10, not by
the padded B · T = 6 (T is only the longest completion of this batch, and changes from batch to batch):

    >>> aggregate(x, m, "sum_over_constant", num_tokens=2 * 5.0)
    tensor(1.)

Mirrors ``ladder.core.aggregate``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --qlora --algo dr_grpo --use-exercises`` trains with it
(``--algo dapo`` for DAPO's constant, ``--algo luspo`` for seq_mean_token_sum; the default ``--loss-type grpo``
uses seq_mean_token_mean).
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def aggregate(per_action: Tensor, mask: Tensor, mode: str = "token_mean",
              num_tokens: float | None = None) -> Tensor:
    """The masked average of a per-action loss, in one of four modes."""
    raise NotImplementedError
