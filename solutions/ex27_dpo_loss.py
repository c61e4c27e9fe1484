"""Solution to exercise 27 — the DPO loss −mean log σ(β·[(log π_θ − log π_ref)(y_w) − (log π_θ − log π_ref)(y_l)])."""

from __future__ import annotations

import torch.nn.functional as F  # noqa: N812
from torch import Tensor


def dpo_loss(chosen_logp: Tensor, rejected_logp: Tensor, ref_chosen_logp: Tensor, ref_rejected_logp: Tensor,
             beta: float) -> Tensor:
    """L_DPO = −mean log σ(r̂_w − r̂_l), r̂ = β·(log π_θ − log π_ref) of each completion."""
    chosen_reward = beta * (chosen_logp - ref_chosen_logp)            # r̂_w, the implicit reward
    rejected_reward = beta * (rejected_logp - ref_rejected_logp)      # r̂_l
    return -F.logsigmoid(chosen_reward - rejected_reward).mean()
