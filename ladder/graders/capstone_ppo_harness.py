"""The harness of Capstone I's grader: what lets ``ladder.core`` judge a learner's PPO from the outside.

    CorePolicy        the learner's agent seen as a core ``Policy`` (``evaluate(batch)``), so that
                      ``core.compute_loss`` computes the oracle's loss on the learner's own network
    Recorder          the learner's agent, recording the observations of every minibatch it is asked about
    CountingAdam      Adam that records, at each ``step``, the gradient it is given and the weights before
    replay            the grader's own copy of the envs, stepped with the actions the learner's rollout took
    heuristic_agent   a fixed, decent CartPole controller with the Agent's interface (for ``evaluate``)
    greedy_returns    the grader's own greedy evaluation of an agent, episode i seeded seed + i
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from ladder import core
from ladder.graders import ORIGINALS  # the core's own functions, captured before any --use-exercises swap
from ladder.rungs import gym_common

ENV_ID = "CartPole-v1"


def vector_env(num_envs: int, max_episode_steps: int | None = None) -> gym.vector.SyncVectorEnv:
    """N CartPoles, SAME_STEP autoreset (a short time limit makes truncations happen in a short rollout)."""
    kwargs = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    return gym.make_vec(ENV_ID, num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}, **kwargs)


class CorePolicy:
    """``evaluate(batch)`` over a batch of single transitions ([b, 1]), by the learner's ``get_action_and_value``."""

    def __init__(self, agent: nn.Module):
        self.agent = agent

    def evaluate(self, batch: core.Batch) -> tuple[Tensor, Tensor, Tensor]:
        shape = batch.actions.shape
        _, logp, entropy, value = self.agent.get_action_and_value(batch.inputs["obs"].flatten(0, 1),
                                                                  batch.actions.flatten())
        return logp.reshape(shape), entropy.reshape(shape), value.reshape(shape)


def core_batch(mb: dict[str, Tensor], old_logp: Tensor | None = None) -> core.Batch:
    """A flat minibatch (obs [b, obs_dim], the rest [b]) as the core's [b, 1] Batch."""
    col = lambda x: x[:, None]   # noqa: E731
    return core.Batch(actions=col(mb["actions"]), mask=torch.ones(len(mb["actions"]), 1),
                      advantages=col(mb["advantages"]), old_logp=col(mb["logp"] if old_logp is None else old_logp),
                      values=col(mb["values"]), returns=col(mb["returns"]), inputs={"obs": col(mb["obs"])})


def core_config(clip_eps: float, value_coef: float, entropy_coef: float) -> core.UpdateConfig:
    """The core's configuration of the contract's loss: advantages whitened per minibatch, V not clipped."""
    return core.UpdateConfig(clip_eps_low=clip_eps, value_coef=value_coef, entropy_coef=entropy_coef,
                             normalize_advantages=True, value_clip=None, max_grad_norm=None)


def core_loss_and_grads(agent: nn.Module, mb: dict, cfg: core.UpdateConfig, old_logp: Tensor | None = None
                        ) -> tuple[float, list[Tensor]]:
    """The core's loss of one minibatch on a copy of ``agent``, and its gradient, parameter by parameter."""
    agent = copy.deepcopy(agent)
    loss, _, _ = ORIGINALS["compute_loss"](CorePolicy(agent), core_batch(mb, old_logp), cfg)
    loss.backward()
    return loss.item(), [torch.zeros_like(p) if p.grad is None else p.grad for p in agent.parameters()]


def total_norm(grads: list[Tensor]) -> float:
    """‖g‖ over all parameters together."""
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()


def clipped(grads: list[Tensor], max_norm: float) -> list[Tensor]:
    """The gradient as ``clip_grad_norm_`` leaves it."""
    norm = torch.tensor(total_norm(grads))
    scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    return [g * scale for g in grads]


def relative_difference(got: list[Tensor], expected: list[Tensor]) -> float:
    """‖got − expected‖ / ‖expected‖ over all parameters together."""
    diff = sum(float((g - e).pow(2).sum()) for g, e in zip(got, expected)) ** 0.5
    return diff / max(sum(float(e.pow(2).sum()) for e in expected) ** 0.5, 1e-12)


class Recorder(nn.Module):
    """The learner's agent (its parameters, its answers), noting the observations of each call that scores
    given actions: the minibatch a loss is about to be computed on."""

    def __init__(self, agent: nn.Module):
        super().__init__()
        self.agent = agent
        self.scored: list[Tensor] = []

    def actor(self, obs):
        return self.agent.actor(obs)

    def get_value(self, obs):
        return self.agent.get_value(obs)

    def get_action_and_value(self, obs, action=None):
        if action is not None:
            self.scored.append(obs.detach().clone())
        return self.agent.get_action_and_value(obs, action)


class CountingAdam(torch.optim.Adam):
    """Adam that notes, at each ``step``, the gradient it was handed, the weights before it and the
    minibatch the agent last scored."""

    def __init__(self, params, recorder: Recorder, **kwargs):
        super().__init__(params, **kwargs)
        self.recorder = recorder
        self.steps: list[dict] = []

    def step(self, closure=None):
        params = [p for group in self.param_groups for p in group["params"]]
        self.steps.append({"grads": [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params],
                           "weights": [p.detach().clone() for p in params],
                           "minibatch": self.recorder.scored[-1] if self.recorder.scored else None})
        return super().step(closure)


def rows_of(minibatch_obs: Tensor, batch_obs: Tensor) -> list[int] | None:
    """Which rows of the batch a minibatch's observations are (None: one of them is not in the batch)."""
    index = {tuple(row.tolist()): i for i, row in enumerate(batch_obs)}
    rows = [index.get(tuple(row.tolist())) for row in minibatch_obs]
    return None if None in rows else rows


@torch.no_grad()
def replay(agent: nn.Module, actions: Tensor, num_envs: int, seed: int, max_episode_steps: int) -> dict:
    """The grader's own envs, reset with ``seed`` and stepped with the rollout's actions [N, T]: what the buffer
    should hold (obs, rewards, terminated, truncated — [N, T]), V(final obs) where truncated, the obs after."""
    envs = vector_env(num_envs, max_episode_steps)
    obs, _ = envs.reset(seed=seed)
    keys = ("obs", "rewards", "terminated", "truncated", "final_values")
    out = {k: [] for k in keys}
    for t in range(actions.shape[1]):
        out["obs"].append(torch.as_tensor(obs, dtype=torch.float32))
        obs, reward, terminated, truncated, info = envs.step(actions[:, t].numpy())
        final_values = torch.full((num_envs,), float("nan"))
        if truncated.any():
            final = torch.as_tensor(np.stack(info["final_obs"][truncated]), dtype=torch.float32)
            final_values[truncated] = agent.get_value(final).reshape(-1)
        for key, x in zip(keys[1:], (reward, terminated, truncated, final_values)):
            out[key].append(torch.as_tensor(x, dtype=torch.float32))
    envs.close()
    out = {k: torch.stack(v, dim=1) for k, v in out.items()}
    out["next_obs"] = torch.as_tensor(obs, dtype=torch.float32)
    return out


class Heuristic(nn.Module):
    """A fixed controller with the Agent's interface: push the way the pole leans, π(right|s) = σ(k·θ), and a
    critic V(s) = 1 + s·v that differs from one obs to the next (a V(s_final) is then never 0 by chance).
    Its greedy episodes last a few tens of steps, a different number from one seed to the next."""

    def __init__(self, k: float = 4.0):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([0.0, 0.0, 1.0, 0.0]) * k)
        self.v = nn.Parameter(torch.tensor([3.0, 1.0, 20.0, 2.0]))

    def actor(self, obs: Tensor) -> Tensor:
        s = obs @ self.w
        return torch.stack([-s / 2, s / 2], dim=-1)

    def get_value(self, obs: Tensor) -> Tensor:
        return 1.0 + obs @ self.v

    def get_action_and_value(self, obs, action=None):
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        action = dist.sample() if action is None else action
        return action, dist.log_prob(action), dist.entropy(), self.get_value(obs)


@torch.no_grad()
def greedy_returns(agent: nn.Module, episodes: int, seed: int) -> list[float]:
    """Returns of ``episodes`` greedy episodes (a = argmax of the agent's actor logits), episode i seeded seed + i."""
    def act(obs: np.ndarray) -> np.ndarray:
        return agent.actor(torch.as_tensor(obs, dtype=torch.float32)).argmax(-1).numpy()
    return gym_common.evaluate(act, ENV_ID, episodes, seed)
