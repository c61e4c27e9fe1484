"""Actor-critic MLP for a vector observation and a discrete action (CartPole)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ladder.core import Batch


def _layer(n_in: int, n_out: int, gain: float) -> nn.Linear:
    """Orthogonal weights, zero bias (the PPO implementation-details convention)."""
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def _mlp(n_in: int, hidden: int, n_out: int, out_gain: float) -> nn.Sequential:
    g = math.sqrt(2)
    return nn.Sequential(_layer(n_in, hidden, g), nn.Tanh(), _layer(hidden, hidden, g), nn.Tanh(),
                         _layer(hidden, n_out, out_gain))


class MLPActorCritic(nn.Module):
    """π_θ(a|s) = softmax(actor(s))_a and, optionally, a separate critic V(s).

    ``batch.inputs["obs"]`` is ``[B, T, obs_dim]``; ``batch.actions`` is ``[B, T]``.
    """

    def __init__(self, obs_dim: int, n_actions: int, hidden: int = 64, critic: bool = True):
        super().__init__()
        self.actor = _mlp(obs_dim, hidden, n_actions, out_gain=0.01)
        self.critic = _mlp(obs_dim, hidden, 1, out_gain=1.0) if critic else None

    def value(self, obs: Tensor) -> Tensor | None:
        return None if self.critic is None else self.critic(obs).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool = False) -> tuple[Tensor, Tensor, Tensor | None]:
        """Sample a ~ π_θ(·|s) (or take the argmax); return (a, log π_θ(a|s), V(s))."""
        log_probs = torch.log_softmax(self.actor(obs), dim=-1)
        if deterministic:
            actions = log_probs.argmax(dim=-1)
        else:
            actions = torch.multinomial(log_probs.exp(), 1).squeeze(-1)
        return actions, log_probs.gather(-1, actions[..., None]).squeeze(-1), self.value(obs)

    def evaluate(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor | None]:
        """log π_θ(a_t|s_t), H(π_θ(·|s_t)) and V(s_t) for the batch's actions, each [B, T]."""
        obs = batch.inputs["obs"]
        log_probs = torch.log_softmax(self.actor(obs), dim=-1)
        logp = log_probs.gather(-1, batch.actions.long()[..., None]).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        return logp, entropy, self.value(obs)
