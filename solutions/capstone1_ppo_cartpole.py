"""Capstone I, a reference answer: PPO on CartPole-v1 in one file (CleanRL's ppo.py, in the course's names).

The contract is the sheet, exercises/capstone1_ppo_cartpole.py. Tensors of the rollout are [N, T]: one row
per environment, one column per step.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

ENV_ID = "CartPole-v1"


def layer(n_in: int, n_out: int, gain: float = np.sqrt(2)) -> nn.Linear:
    """Orthogonal weights, zero bias."""
    linear = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(linear.weight, gain)
    nn.init.zeros_(linear.bias)
    return linear


class Agent(nn.Module):
    """π_θ(a|s) = softmax(actor(s))_a and a separate critic V(s)."""

    def __init__(self, obs_dim: int = 4, n_actions: int = 2, hidden: int = 64):
        super().__init__()
        self.critic = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                                    layer(hidden, 1, gain=1.0))
        self.actor = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                                   layer(hidden, n_actions, gain=0.01))

    def get_value(self, obs):
        return self.critic(obs).squeeze(-1)

    def get_action_and_value(self, obs, action=None):
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.get_value(obs)


def make_envs(num_envs: int) -> gym.vector.SyncVectorEnv:
    return gym.make_vec(ENV_ID, num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})


@torch.no_grad()
def collect_rollout(agent: Agent, envs, obs: np.ndarray, num_steps: int) -> tuple[dict, np.ndarray]:
    """Step the N envs T times with π_old = π_θ; the buffer's tensors are [N, T] (obs [N, T, obs_dim])."""
    N = envs.num_envs
    steps = {k: [] for k in ("obs", "actions", "logp", "values", "rewards", "terminated", "truncated",
                             "final_values")}
    for _ in range(num_steps):
        obs_t = torch.as_tensor(obs, dtype=torch.float32)
        action, logp, _, value = agent.get_action_and_value(obs_t)
        obs, reward, terminated, truncated, info = envs.step(action.numpy())
        final_values = torch.zeros(N)
        if truncated.any():   # a time limit, not a failure: V(s_final) stands in for the future
            final_obs = np.stack(info["final_obs"][truncated])
            final_values[truncated] = agent.get_value(torch.as_tensor(final_obs, dtype=torch.float32))
        for key, x in (("obs", obs_t), ("actions", action), ("logp", logp), ("values", value),
                       ("rewards", reward), ("terminated", terminated), ("truncated", truncated),
                       ("final_values", final_values)):
            steps[key].append(torch.as_tensor(x, dtype=torch.long if key == "actions" else torch.float32))
    buffer = {k: torch.stack(v, dim=1) for k, v in steps.items()}   # [N, T, ...]
    buffer["last_values"] = agent.get_value(torch.as_tensor(obs, dtype=torch.float32))
    return buffer, obs


def gae(rewards, values, terminated, truncated, final_values, last_values, gamma: float, lam: float):
    """Â_t = δ_t + γλ(1 − d_t)Â_{t+1},  δ_t = r_t + γ·V_next − V(s_t),  R_t = Â_t + V(s_t)."""
    N, T = rewards.shape
    terminated, truncated = terminated.bool(), truncated.bool()
    next_values = torch.cat([values[:, 1:], last_values[:, None]], dim=1)
    next_values = torch.where(truncated, final_values, next_values)
    next_values = torch.where(terminated, 0.0, next_values)
    not_done = 1.0 - (terminated | truncated).float()
    deltas = rewards + gamma * next_values - values
    advantages = torch.zeros_like(rewards)
    running = torch.zeros(N)
    for t in reversed(range(T)):
        running = deltas[:, t] + gamma * lam * not_done[:, t] * running
        advantages[:, t] = running
    return advantages, advantages + values


def ppo_loss(agent: Agent, mb: dict, clip_eps: float, value_coef: float, entropy_coef: float):
    """L = mean(−min(ρ·Â, clip(ρ, 1 − ε, 1 + ε)·Â)) + c_v·mean(½(V − R)²) − c_H·mean(H),  ρ = π_θ(a|s)/π_old(a|s)."""
    _, logp, entropy, values = agent.get_action_and_value(mb["obs"], mb["actions"])
    log_ratio = logp - mb["logp"]
    ratio = log_ratio.exp()
    adv = (mb["advantages"] - mb["advantages"].mean()) / (mb["advantages"].std() + 1e-8)
    pg_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv).mean()
    v_loss = 0.5 * ((values - mb["returns"]) ** 2).mean()
    loss = pg_loss + value_coef * v_loss - entropy_coef * entropy.mean()
    with torch.no_grad():
        stats = {"loss": loss.item(), "pg_loss": pg_loss.item(), "value_loss": v_loss.item(),
                 "entropy": entropy.mean().item(), "approx_kl": ((ratio - 1) - log_ratio).mean().item(),
                 "clip_frac": ((ratio - 1).abs() > clip_eps).float().mean().item()}
    return loss, stats


def update(agent, optimizer, batch: dict, num_epochs: int, num_minibatches: int, clip_eps: float = 0.2,
           value_coef: float = 0.5, entropy_coef: float = 0.0, max_grad_norm: float = 0.5, generator=None):
    """μ = num_epochs passes over the batch, each M shuffled minibatches, one optimiser step each."""
    n = len(batch["actions"])
    size = n // num_minibatches
    for _ in range(num_epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            mb = {k: v[order[start:start + size]] for k, v in batch.items()}
            loss, stats = ppo_loss(agent, mb, clip_eps, value_coef, entropy_coef)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
            optimizer.step()
    return stats


@torch.no_grad()
def evaluate(agent: Agent, episodes: int = 20, seed: int = 10_000) -> list[float]:
    """Returns of greedy episodes (a = argmax π), episode i seeded seed + i."""
    envs = make_envs(episodes)
    obs, _ = envs.reset(seed=[seed + i for i in range(episodes)])
    returns, running = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while running.any():
        logits = agent.actor(torch.as_tensor(obs, dtype=torch.float32))
        obs, reward, terminated, truncated, _ = envs.step(logits.argmax(-1).numpy())
        returns += reward * running
        running &= ~(terminated | truncated)
    envs.close()
    return returns.tolist()


def train(total_steps: int = 100_000, seed: int = 0, num_envs: int = 8, num_steps: int = 32, lr: float = 2e-3,
          gamma: float = 0.98, lam: float = 0.8, num_epochs: int = 15, num_minibatches: int = 1,
          clip_eps: float = 0.2, value_coef: float = 0.5, entropy_coef: float = 0.0, max_grad_norm: float = 0.5,
          eval_every: int = 5_000, solve_return: float = 500.0):
    """PPO until ``total_steps`` env steps, or until a greedy evaluation reaches ``solve_return`` (500: every one of
    its 10 episodes balanced to the time limit, a margin over the 475 that counts as solved). It calls make_envs,
    collect_rollout, gae, update and evaluate by their module-level names, as the contract asks."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    envs = make_envs(num_envs)
    agent = Agent()
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
    obs, _ = envs.reset(seed=seed)
    num_updates = total_steps // (num_envs * num_steps)
    history, finished, episode_return = [], [], np.zeros(num_envs)
    for u in range(num_updates):
        optimizer.param_groups[0]["lr"] = lr * (1 - u / num_updates)
        buffer, obs = collect_rollout(agent, envs, obs, num_steps)
        advantages, returns = gae(buffer["rewards"], buffer["values"], buffer["terminated"], buffer["truncated"],
                                  buffer["final_values"], buffer["last_values"], gamma, lam)
        for t in range(num_steps):   # training episodes' returns, for the history
            episode_return += buffer["rewards"][:, t].numpy()
            ended = (buffer["terminated"][:, t] + buffer["truncated"][:, t]).bool().numpy()
            finished += episode_return[ended].tolist()
            episode_return[ended] = 0.0
        batch = {k: buffer[k].flatten(0, 1) for k in ("obs", "actions", "logp", "values")}
        batch.update(advantages=advantages.flatten(), returns=returns.flatten())
        stats = update(agent, optimizer, batch, num_epochs, num_minibatches, clip_eps, value_coef, entropy_coef,
                       max_grad_norm, generator)
        record = {"env_steps": (u + 1) * num_envs * num_steps, **stats,
                  "episode_return": float(np.mean(finished)) if finished else None}
        finished = []
        if record["env_steps"] // eval_every > u * num_envs * num_steps // eval_every:
            record["eval_return"] = float(np.mean(evaluate(agent, 10, seed=seed + 1_000)))
        history.append(record)
        if record.get("eval_return", 0.0) >= solve_return:
            break
    envs.close()
    return agent, history
