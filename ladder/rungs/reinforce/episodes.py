"""REINFORCE's experience: N single envs, one complete episode each from the current π_θ, padded to ``[N, T_max]``
(``collect_episodes``); the envs' full state, RNGs included, as a checkpoint part (``EpisodeEnvs``)."""

from __future__ import annotations

import pickle

import numpy as np
import torch

from ladder.policies.mlp import MLPActorCritic


def collect_episodes(policy: MLPActorCritic, envs: list, seeds: list | None):
    """One complete episode per env, all sampled from the current π_θ; padded to ``[N, T_max]``."""
    N = len(envs)
    obs = np.stack([env.reset(seed=None if seeds is None else seeds[i])[0] for i, env in enumerate(envs)])
    traj = [{"obs": [], "act": [], "rew": []} for _ in range(N)]
    active = list(range(N))
    while active:
        obs_t = torch.as_tensor(obs[active], dtype=torch.float32)
        actions, _, _ = policy.act(obs_t)
        still = []
        for j, i in enumerate(active):
            traj[i]["obs"].append(obs_t[j])
            traj[i]["act"].append(int(actions[j]))
            next_obs, reward, terminated, truncated, _ = envs[i].step(int(actions[j]))
            traj[i]["rew"].append(float(reward))
            obs[i] = next_obs
            if not (terminated or truncated):
                still.append(i)
        active = still
    T = max(len(t["act"]) for t in traj)
    obs_b = torch.zeros(N, T, obs.shape[1])
    act_b = torch.zeros(N, T, dtype=torch.long)
    rew_b, mask = torch.zeros(N, T), torch.zeros(N, T)
    for i, t in enumerate(traj):
        n = len(t["act"])
        obs_b[i, :n] = torch.stack(t["obs"])
        act_b[i, :n] = torch.tensor(t["act"])
        rew_b[i, :n] = torch.tensor(t["rew"])
        mask[i, :n] = 1.0
    return obs_b, act_b, rew_b, mask


class EpisodeEnvs:
    """The update's N single envs as a checkpoint part (their full state, RNGs included)."""

    def __init__(self, envs: list):
        self.envs = envs

    def state_dict(self) -> bytes:
        return pickle.dumps(self.envs)

    def load_state_dict(self, snapshot: bytes) -> None:
        self.envs[:] = pickle.loads(snapshot)  # noqa: S301 - our own checkpoint
