"""CartPole PPO's rollout: N vector envs run for T steps with π_old = π_θ (``collect``), a truncated episode
bootstrapped with V(s_final)."""

from __future__ import annotations

import numpy as np
import torch

from ladder.policies.mlp import MLPActorCritic
from ladder.rungs.cartpole.options import Config


def collect(policy: MLPActorCritic, envs, obs: np.ndarray, cfg: Config, episode: dict):
    """Run the N envs for T steps with π_old = π_θ; return the rollout as ``[N, T]`` tensors."""
    N, T = cfg.num_envs, cfg.num_steps
    obs_buf = torch.zeros(T, N, obs.shape[1])
    act_buf = torch.zeros(T, N, dtype=torch.long)
    logp_buf, val_buf, rew_buf, done_buf = (torch.zeros(T, N) for _ in range(4))
    for t in range(T):
        obs_t = torch.as_tensor(obs, dtype=torch.float32)
        actions, logp, values = policy.act(obs_t)
        obs, reward, terminated, truncated, info = envs.step(actions.numpy())
        reward = reward.astype(np.float32)
        episode["return"] += reward
        episode["length"] += 1
        ended = terminated | truncated
        if truncated.any():
            # Time limit, not failure: bootstrap with V(s_final) so the critic sees no cliff.
            final = torch.as_tensor(np.stack(info["final_obs"][truncated]), dtype=torch.float32)
            reward[truncated] += cfg.gamma * policy.value(final).detach().numpy()
        for i in np.flatnonzero(ended):
            episode["finished"].append(float(episode["return"][i]))
            episode["return"][i] = 0.0
            episode["length"][i] = 0
        obs_buf[t], act_buf[t], logp_buf[t], val_buf[t] = obs_t, actions, logp, values
        rew_buf[t] = torch.as_tensor(reward)
        done_buf[t] = torch.as_tensor(ended, dtype=torch.float32)
    with torch.no_grad():
        last_values = policy.value(torch.as_tensor(obs, dtype=torch.float32))
    tn = lambda x: x.transpose(0, 1).contiguous()  # noqa: E731 - [T, N] → [N, T]
    return obs, tn(obs_buf), tn(act_buf), tn(logp_buf), tn(val_buf), tn(rew_buf), tn(done_buf), last_values
