"""Solution to exercise 1 — discounted returns-to-go: G_t = r_t + γ · G_{t+1}."""

from __future__ import annotations

import torch
from torch import Tensor


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """G_t = r_t + γ · G_{t+1} over each row's real steps; 0 on padding."""
    rewards = torch.where(mask.bool(), rewards, 0.0)   # padding earns nothing, whatever it holds
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])          # G after the last column: 0
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running      # G_t = r_t + γ G_{t+1}
        returns[:, t] = running
    return returns * mask                              # padding gets G = 0
