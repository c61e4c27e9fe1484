"""Rung 1: REINFORCE on CartPole — the log-derivative trick with returns-to-go.

Each update: N complete episodes from π_θ, padded into ``[N, T_max]`` with a mask →
returns-to-go G_t → advantages G_t − b(s_t) → ``ladder.core.update`` with the plain
policy-gradient loss −Â·log π_θ, one pass (on-policy: REINFORCE cannot reuse a batch).
"""

from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ladder import core
from ladder.cli import (
    MAX_EPISODES,
    MAX_SCALE,
    MAX_STEPS,
    RunOptions,
    Text,
    coefficient,
    count,
    int_range,
    interval,
    learning_rate,
    option,
    positive,
    probability,
)
from ladder.plots import Panel
from ladder.policies.mlp import MLPActorCritic
from ladder.rungs import gym_common
from ladder.rungs.protocol import TRAINING_WRITES, no_export
from ladder.runtime import loop
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession

NAME = "reinforce"
CURVES = [Panel("episode return", "return (steps balanced)",
                {"episode_return": "training episodes (sampled)",
                 "eval_return_mean": "greedy evaluation ({eval_episodes} episodes)"},
                threshold="{solve_return}", threshold_label="solved (--solve-return {solve_return:g})"),
          Panel("entropy of π_θ", "nats per action", {"entropy": ""}),
          Panel("gradient norm", "‖g‖ before clipping", {"grad_norm": ""})]
BASELINES = ("none", "whiten", "value")


@dataclass
class Config(RunOptions):
    env_id: str = option("CartPole-v1", "gymnasium environment id (vector obs, discrete actions)", Text())
    total_steps: int = option(300_000, "environment steps to train for at most", count(1, MAX_STEPS))
    episodes_per_update: int = option(8, "complete episodes per batch (one env each; at most 4096)",
                                      int_range(1, 4096))
    lr: float = option(5e-3, "Adam learning rate", learning_rate())
    gamma: float = option(0.99, "discount γ of the returns-to-go", probability())
    baseline: str = option("whiten", "b(s_t): none (Â = G_t), whiten (standardised G_t) or value "
                           "(a learned critic V(s_t))", choices=BASELINES)
    value_coef: float = option(0.5, "value-loss coefficient (baseline=value)", coefficient())
    entropy_coef: float = option(0.0, "entropy bonus coefficient", coefficient())
    max_grad_norm: float = option(1.0, "gradient-norm clip", positive(MAX_SCALE))
    hidden: int = option(64, "hidden units per layer (at most 65536)", int_range(1, 65536))
    eval_every: int = option(10_000, "evaluate every N env steps", count(1, MAX_STEPS))
    eval_episodes: int = option(20, "greedy episodes per evaluation", count(1, MAX_EPISODES))
    solve_return: float = option(400.0, "evaluation mean that counts as solved (|R| at most 1e9)", interval(-1e9, 1e9))
    stop_on_solve: bool = option(True, "stop once an evaluation reaches --solve-return")
    threads: int = option(1, "torch CPU threads (small MLPs run fastest on one; 0: torch's default; at most 1024)",
                          int_range(0, 1024))


PRESETS = {"tiny": {"total_steps": 40_000, "eval_every": 5_000}}
ALGOS: dict = {}
WRITES = TRAINING_WRITES
RESOLVED: dict = {}
export = no_export


def validate(cfg: Config) -> None:
    """Nothing relates several options here; each option's domain is checked when the Config is built."""


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


def advantages_for(cfg: Config, policy: MLPActorCritic, obs, returns, mask):
    """Â_t = G_t − b(s_t) for the chosen baseline."""
    if cfg.baseline == "none":
        return returns
    if cfg.baseline == "whiten":
        return core.whiten(returns, mask)
    with torch.no_grad():
        return (returns - policy.value(obs)) * mask


class EpisodeEnvs:
    """The update's N single envs as a checkpoint part (their full state, RNGs included)."""

    def __init__(self, envs: list):
        self.envs = envs

    def state_dict(self) -> bytes:
        return pickle.dumps(self.envs)

    def load_state_dict(self, snapshot: bytes) -> None:
        self.envs[:] = pickle.loads(snapshot)  # noqa: S301 - our own checkpoint


def train(cfg: Config) -> dict:
    """Train REINFORCE on CartPole; write metrics.jsonl, summary.json, curves.png and policy.pt into ``cfg.out``."""
    validate(cfg)
    if cfg.threads:  # 0: torch's default
        torch.set_num_threads(cfg.threads)
    return loop.train(cfg, NAME, build, total=cfg.total_steps, unit="step")


def build(cfg: Config, run: RunSession) -> Recipe:
    """REINFORCE as the loop runs it: N complete episodes → returns-to-go → Â = G_t − b(s_t) → ``core.update``."""
    seed_everything(cfg.seed)
    envs = [gym_common.make_env(cfg.env_id) for _ in range(cfg.episodes_per_update)]
    obs_dim, n_actions = gym_common.env_dims(cfg.env_id)
    policy = MLPActorCritic(obs_dim, n_actions, cfg.hidden, critic=cfg.baseline == "value").to(cfg.device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.lr, fused=cfg.device == "cpu")
    update_cfg = core.UpdateConfig(mu=1, num_minibatches=1, objective="reinforce", value_coef=cfg.value_coef,
                                   entropy_coef=cfg.entropy_coef, max_grad_norm=cfg.max_grad_norm)
    progress = {"env_steps": 0, "evals": []}

    def update() -> dict:
        """N episodes from π_θ → G_t → one pass of −Â·log π_θ. The envs are seeded at the first update only;
        later resets (and a resumed run) continue each env's own RNG."""
        seeds = [cfg.seed * 1000 + i for i in range(cfg.episodes_per_update)] if progress["env_steps"] == 0 else None
        obs, actions, rewards, mask = collect_episodes(policy, envs, seeds)
        returns = core.discounted_returns(rewards, mask, cfg.gamma)
        batch = core.Batch(actions=actions, mask=mask, rewards=rewards, returns=returns,
                           advantages=advantages_for(cfg, policy, obs, returns, mask), inputs={"obs": obs})
        passes = core.update(policy, batch, optimizer, update_cfg)
        progress["env_steps"] += batch.num_tokens
        return {"env_steps": progress["env_steps"], "episode_return": rewards.sum(1).mean().item(),
                "episodes": len(batch), **passes[-1],
                "skipped_steps": run.skipped_steps(passes, update_cfg.num_minibatches)}

    def evaluate() -> dict:
        return gym_common.recorded_evaluation(policy, cfg, progress)

    def finished(updates: int) -> bool:
        evals = progress["evals"]
        solved = bool(evals) and evals[-1][1] >= cfg.solve_return
        return progress["env_steps"] >= cfg.total_steps or (solved and cfg.stop_on_solve)

    def summary() -> dict:
        evals = progress["evals"]
        first_solve = next((s for s, r in evals if r >= cfg.solve_return), None)
        summary = {"rung": NAME, "solved": first_solve is not None, "solved_at_env_steps": first_solve,
                   "env_steps": progress["env_steps"], "wall_s": run.wall_s,
                   "eval_return_mean": evals[-1][1] if evals else None,
                   "best_eval_return_mean": max((r for _, r in evals), default=None), "evals": evals,
                   "seed": cfg.seed}
        torch.save(policy.state_dict(), run.dir / "policy.pt")
        return summary

    return Recipe(parts={"policy": policy, "optimizer": optimizer, "envs": EpisodeEnvs(envs)}, progress=progress,
                  update=update, finished=finished, summary=summary,
                  curves=lambda: [p.filled(**asdict(cfg)) for p in CURVES], x="env_steps", evaluate=evaluate,
                  eval_every=cfg.eval_every, clock=lambda updates: progress["env_steps"],
                  postfix=lambda record: {"eval": f"{progress['evals'][-1][1]:.0f}"} if progress["evals"] else {})
