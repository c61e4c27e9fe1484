"""Exercise 6 — the critic's loss, optionally clipped (PPO).

Goes with notebook 2, section “GAE”.

Regress V(s_t) on the return R_t. Clipping keeps the new value within c of the value seen at
sampling time, and takes the *worse* of the two errors, so the clip never helps the loss:

    L_t = ½ (V − R)²                                               (clip = None)
    L_t = ½ max( (V − R)²,  (V_old + clip(V − V_old, −c, c) − R)² )  (clip = c)

    values      [B, T]  V(s_t) now, with gradient
    old_values  [B, T]  V_old(s_t), from sampling time (only used with a clip)
    returns     [B, T]  R_t, the targets
    clip        float   c, or None for no clip
    result      [B, T]  L_t

Worked example, c = 0.2: V_old = 0.5, V = 1.0, R = 2.0. Unclipped: (1 − 2)² = 1. Clipped: V is
held to 0.7, (0.7 − 2)² = 1.69. The max is 1.69, so L = 0.845.

    >>> value_loss(torch.tensor([[1.0]]), torch.tensor([[0.5]]), torch.tensor([[2.0]]), clip=0.2)
    tensor([[0.8450]])
    >>> value_loss(torch.tensor([[1.0]]), torch.tensor([[0.5]]), torch.tensor([[2.0]]))
    tensor([[0.5000]])

Mirrors ``ladder.core.value_loss``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run cartpole --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, clip: float | None = None) -> Tensor:
    """½ (V − R)², or with a clip the larger of the unclipped and clipped errors."""
    raise NotImplementedError
