"""Solution to exercise 26 — the Bradley–Terry loss −mean log σ(r_w − r_l − m)."""

from __future__ import annotations

import torch.nn.functional as F  # noqa: N812
from torch import Tensor


def bradley_terry_loss(chosen_rewards: Tensor, rejected_rewards: Tensor, margin: Tensor | None = None) -> Tensor:
    """L_BT = −mean log σ(r_w − r_l − m) over the pairs (m: a margin per pair, None: 0)."""
    difference = chosen_rewards - rejected_rewards
    if margin is not None:
        difference = difference - margin
    return -F.logsigmoid(difference).mean()          # logsigmoid: finite where σ underflows
