"""Solution to exercise 28 — the teacher's reward r_t = −(log π_θ − log π_teacher)(y_t), 0 on padding."""

from __future__ import annotations

import torch
from torch import Tensor


def distillation_rewards(logp: Tensor, teacher_logp: Tensor, mask: Tensor) -> Tensor:
    """r_t = −(log π_θ − log π_teacher)(y_t) on each real token, 0 on padding."""
    per_token = teacher_logp - logp                      # −k1 of the reverse KL, π_teacher in π_ref's place
    return torch.where(mask.bool(), per_token, 0.0)      # not × mask: padding may hold nan or −inf
