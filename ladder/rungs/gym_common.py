"""Gymnasium plumbing shared by the CartPole rungs: vector envs, evaluation, env snapshots."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import torch

from ladder.runtime.errors import UsageError


def make_env(env_id: str) -> gym.Env:
    try:
        env = gym.make(env_id)
    except gym.error.Error as e:
        raise UsageError(f"--env-id {env_id!r} is not a gymnasium environment here ({type(e).__name__})") from None
    if not isinstance(env.action_space, gym.spaces.Discrete) or len(env.observation_space.shape) != 1:
        raise UsageError(f"--env-id {env_id!r}: the CartPole rungs need a vector observation and discrete actions")
    return env


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.SyncVectorEnv:
    """N copies stepped together. SAME_STEP autoreset: a finished env returns its next episode's
    first observation at once, and the finished episode's last one in ``info["final_obs"]``."""
    make_env(env_id).close()
    return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})


def env_dims(env_id: str) -> tuple[int, int]:
    env = make_env(env_id)
    dims = env.observation_space.shape[0], int(env.action_space.n)
    env.close()
    return dims


def evaluate(act, env_id: str, episodes: int = 20, seed: int = 10_000) -> list[float]:
    """Returns of ``episodes`` deterministic episodes, run side by side in a vector env.

    ``act(obs [N, obs_dim] float32 numpy) -> actions [N]`` chooses the greedy action.
    Episode i is seeded ``seed + i``, so every evaluation of every agent sees the same starts.
    """
    envs = gym.make_vec(env_id, num_envs=episodes, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    obs, _ = envs.reset(seed=[seed + i for i in range(episodes)])
    returns = np.zeros(episodes)
    running = np.ones(episodes, dtype=bool)
    while running.any():
        obs, reward, terminated, truncated, _ = envs.step(np.asarray(act(obs)))
        returns += reward * running
        running &= ~(terminated | truncated)
    envs.close()
    return returns.tolist()


def greedy(policy):
    """The argmax action of a ``MLPActorCritic``, as ``evaluate`` wants it."""
    def act(obs: np.ndarray) -> np.ndarray:
        return policy.act(torch.as_tensor(obs, dtype=torch.float32), deterministic=True)[0].numpy()
    return act


def snapshot_envs(envs) -> bytes:
    """The full state (physics, step counters, RNGs) of each sub-environment, for checkpoints."""
    return pickle.dumps(envs.envs)


def restore_envs(envs, snapshot: bytes) -> None:
    envs.envs = pickle.loads(snapshot)  # noqa: S301 - our own checkpoint


class EnvState:
    """A vector env as a checkpoint part: ``state_dict`` is the snapshot, ``load_state_dict`` restores it."""

    def __init__(self, envs):
        self.envs = envs

    def state_dict(self) -> bytes:
        return snapshot_envs(self.envs)

    def load_state_dict(self, snapshot: bytes) -> None:
        restore_envs(self.envs, snapshot)


def recorded_evaluation(policy, cfg, counters: dict) -> dict:
    """The mean return of ``cfg.eval_episodes`` greedy episodes on the evaluation seeds (``cfg.seed + 10_000`` on),
    appended to ``counters["evals"]`` as (env steps so far, mean): the CartPole rungs' evaluation."""
    mean = float(np.mean(evaluate(greedy(policy), cfg.env_id, cfg.eval_episodes, seed=cfg.seed + 10_000)))
    counters["evals"].append((counters["env_steps"], mean))
    return {"eval_return_mean": mean}
