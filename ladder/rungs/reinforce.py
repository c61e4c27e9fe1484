"""Rung 1: REINFORCE on CartPole — the log-derivative trick with returns-to-go.

Each update: N complete episodes from π_θ, padded into ``[N, T_max]`` with a mask →
returns-to-go G_t → advantages G_t − b(s_t) → ``ladder.core.update`` with the plain
policy-gradient loss −Â·log π_θ, one pass (on-policy: REINFORCE cannot reuse a batch).
"""

from __future__ import annotations

import pickle
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from ladder import core
from ladder.cli import Number, RunOptions, Text, at_least, non_negative, option, positive, probability, show_progress
from ladder.policies.mlp import MLPActorCritic
from ladder.rungs import gym_common
from ladder.runlog import NonFiniteGuard, RunLog, rng_state, seed_everything, set_rng_state

NAME = "reinforce"
CURVES = {"episode_return": "training episode return", "eval_return_mean": "greedy eval return (20 eps)",
          "entropy": "entropy", "grad_norm": "gradient norm"}
BASELINES = ("none", "whiten", "value")


@dataclass
class Config(RunOptions):
    env_id: str = option("CartPole-v1", "gymnasium environment id (vector obs, discrete actions)", Text())
    total_steps: int = option(300_000, "environment steps to train for at most", at_least(1))
    episodes_per_update: int = option(8, "complete episodes per batch (one env each)", at_least(1))
    lr: float = option(5e-3, "Adam learning rate", positive())
    gamma: float = option(0.99, "discount γ of the returns-to-go", probability())
    baseline: str = option("whiten", "b(s_t): none (Â = G_t), whiten (standardised G_t) or value "
                           "(a learned critic V(s_t))", choices=BASELINES)
    value_coef: float = option(0.5, "value-loss coefficient (baseline=value)", non_negative())
    entropy_coef: float = option(0.0, "entropy bonus coefficient", non_negative())
    max_grad_norm: float = option(1.0, "gradient-norm clip", positive())
    hidden: int = option(64, "hidden units per layer", at_least(1))
    eval_every: int = option(10_000, "evaluate every N env steps", at_least(1))
    eval_episodes: int = option(20, "greedy episodes per evaluation", at_least(1))
    solve_return: float = option(400.0, "evaluation mean that counts as solved", Number(float))
    stop_on_solve: bool = option(True, "stop once an evaluation reaches --solve-return")
    threads: int = option(1, "torch CPU threads (small MLPs run fastest on one)", at_least(0))


PRESETS = {"tiny": {"total_steps": 40_000, "eval_every": 5_000}}


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


def train(cfg: Config) -> dict:
    """Train REINFORCE on CartPole; write metrics.jsonl, summary.json and curves.png into ``cfg.out``."""
    validate(cfg)
    torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    envs = [gym_common.make_env(cfg.env_id) for _ in range(cfg.episodes_per_update)]
    obs_dim, n_actions = gym_common.env_dims(cfg.env_id)
    policy = MLPActorCritic(obs_dim, n_actions, cfg.hidden, critic=cfg.baseline == "value").to(cfg.device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.lr, fused=cfg.device == "cpu")
    log = RunLog(cfg.out, NAME, {"rung": NAME, **asdict(cfg)}, resume=cfg.resume is not None,
                 overwrite=cfg.overwrite, tensorboard=cfg.tensorboard)
    guard = NonFiniteGuard(cfg.max_nonfinite_updates, log.dir, warn=tqdm.write)
    update_cfg = core.UpdateConfig(mu=1, num_minibatches=1, objective="reinforce", value_coef=cfg.value_coef,
                                   entropy_coef=cfg.entropy_coef, max_grad_norm=cfg.max_grad_norm)

    u, env_steps, wall_before, evals = 0, 0, 0.0, []
    seeds = [cfg.seed * 1000 + i for i in range(cfg.episodes_per_update)]
    state = log.load_checkpoint() if cfg.resume else None
    if state is not None:
        policy.load_state_dict(state["policy"])
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        envs = pickle.loads(state["envs"])  # noqa: S301 - our own checkpoint
        u, env_steps, wall_before, evals, seeds = (state["update"], state["env_steps"], state["wall_s"],
                                                   state["evals"], None)

    solved = bool(evals) and evals[-1][1] >= cfg.solve_return
    next_eval = (env_steps // cfg.eval_every + 1) * cfg.eval_every
    t0 = time.perf_counter() - wall_before
    bar = tqdm(total=cfg.total_steps, initial=env_steps, unit="step", desc=NAME,
               disable=not show_progress(cfg.progress))
    while env_steps < cfg.total_steps and not (solved and cfg.stop_on_solve):
        obs, actions, rewards, mask = collect_episodes(policy, envs, seeds)
        seeds = None  # seeded once; later resets continue each env's own RNG
        returns = core.discounted_returns(rewards, mask, cfg.gamma)
        batch = core.Batch(actions=actions, mask=mask, rewards=rewards, returns=returns,
                           advantages=advantages_for(cfg, policy, obs, returns, mask), inputs={"obs": obs})
        passes = core.update(policy, batch, optimizer, update_cfg)
        u += 1
        steps = batch.num_tokens
        env_steps += steps
        bar.update(steps)
        record = {"step": u, "env_steps": env_steps, "episode_return": rewards.sum(1).mean().item(),
                  "episodes": len(batch), **passes[-1]}
        record["skipped_steps"] = guard(passes, update_cfg.num_minibatches)
        if env_steps >= next_eval or env_steps >= cfg.total_steps:
            next_eval = (env_steps // cfg.eval_every + 1) * cfg.eval_every
            returns_eval = gym_common.evaluate(gym_common.greedy(policy), cfg.env_id, cfg.eval_episodes,
                                               seed=cfg.seed + 10_000)
            record["eval_return_mean"] = float(np.mean(returns_eval))
            evals.append((env_steps, record["eval_return_mean"]))
            solved = record["eval_return_mean"] >= cfg.solve_return
            bar.set_postfix(eval=f"{record['eval_return_mean']:.0f}")
        record["wall_s"] = time.perf_counter() - t0
        log.log(record)
        if u % cfg.checkpoint_every == 0:
            log.save_checkpoint({"policy": policy.state_dict(), "optimizer": optimizer.state_dict(),
                                 "rng": rng_state(), "envs": pickle.dumps(envs), "evals": evals,
                                 "update": u, "env_steps": env_steps, "wall_s": time.perf_counter() - t0})
    bar.close()

    first_solve = next((s for s, r in evals if r >= cfg.solve_return), None)
    summary = {"rung": NAME, "solved": first_solve is not None, "solved_at_env_steps": first_solve,
               "env_steps": env_steps, "wall_s": time.perf_counter() - t0,
               "eval_return_mean": evals[-1][1] if evals else None,
               "best_eval_return_mean": max((r for _, r in evals), default=None), "evals": evals, "seed": cfg.seed}
    torch.save(policy.state_dict(), log.dir / "policy.pt")
    log.finish(summary, CURVES, x="env_steps")
    return summary
