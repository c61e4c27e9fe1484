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
from ladder.rungs.protocol import Rung
from ladder.runtime import loop
from ladder.runtime.errors import UsageError
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession

NAME = "reinforce"
RUNG = Rung(name=NAME, position=1,
            summary="REINFORCE on CartPole (returns-to-go, optional baseline)",
            exercises=("ex01_discounted_returns", "ex02_reinforce_loss", "ex04_whiten", "ex11_aggregate",
                       "ex17_compute_loss", "ex18_update"),
            vitals=("return", "action_entropy", "grad_norm"))
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
RESOLVED: dict = {}


def validate(cfg: Config) -> None:
    """--value-coef weighs the loss of the critic that only --baseline value has: refused, in one line, without it
    (each option's own domain is checked when the Config is built)."""
    if cfg.baseline != "value" and cfg.value_coef != Config.value_coef:
        raise UsageError("--value-coef weighs the value loss of the critic V(s_t) that --baseline value learns; "
                         f"--baseline {cfg.baseline} has none: drop --value-coef (or use --baseline value)")


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
    return loop.train(cfg, NAME, build)


def build(cfg: Config, run: RunSession) -> Recipe:
    """REINFORCE as the loop runs it (``Reinforce``)."""
    return Reinforce(cfg, run)


class Reinforce(Recipe):
    """REINFORCE on CartPole: N complete episodes → returns-to-go → Â = G_t − b(s_t) → ``core.update``; the clock in
    environment steps (done at --total-steps), a greedy evaluation every ``--eval-every``, done once solved
    (``--stop-on-solve``)."""

    def __init__(self, cfg: Config, run: RunSession):
        seed_everything(cfg.seed)
        self.cfg, self.run = cfg, run
        self.envs = [gym_common.make_env(cfg.env_id) for _ in range(cfg.episodes_per_update)]
        obs_dim, n_actions = gym_common.env_dims(cfg.env_id)
        self.policy = MLPActorCritic(obs_dim, n_actions, cfg.hidden, critic=cfg.baseline == "value").to(cfg.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.lr, fused=cfg.device == "cpu")
        self.update_cfg = core.UpdateConfig(mu=1, num_minibatches=1, objective="reinforce", value_coef=cfg.value_coef,
                                            entropy_coef=cfg.entropy_coef, max_grad_norm=cfg.max_grad_norm)
        self.plan = loop.Plan(updates=cfg.total_steps, clock="env_steps", total=cfg.total_steps, unit="step",
                              eval_every=cfg.eval_every, curves=tuple(p.filled(**asdict(cfg)) for p in CURVES),
                              bar=(("eval", "eval_return_mean", ".0f"),))  # updates: at least a step each
        self.counters = {"env_steps": 0, "evals": []}

    def update(self) -> dict:
        """N episodes from π_θ → G_t → one pass of −Â·log π_θ. The envs are seeded at the first update only;
        later resets (and a resumed run) continue each env's own RNG."""
        cfg, counters = self.cfg, self.counters
        seeds = [cfg.seed * 1000 + i for i in range(cfg.episodes_per_update)] if counters["env_steps"] == 0 else None
        obs, actions, rewards, mask = collect_episodes(self.policy, self.envs, seeds)
        returns = core.discounted_returns(rewards, mask, cfg.gamma)
        batch = core.Batch(actions=actions, mask=mask, rewards=rewards, returns=returns,
                           advantages=advantages_for(cfg, self.policy, obs, returns, mask), inputs={"obs": obs})
        passes = core.update(self.policy, batch, self.optimizer, self.update_cfg)
        counters["env_steps"] += batch.num_tokens
        self.done = counters["env_steps"] >= cfg.total_steps
        return {"env_steps": counters["env_steps"], "episode_return": rewards.sum(1).mean().item(),
                "episodes": len(batch), **passes[-1], **core.step_counts(passes, self.update_cfg.num_minibatches)}

    def evaluate(self) -> dict:
        """Greedy episodes; solved (and so done, with ``--stop-on-solve``) once their mean reaches --solve-return."""
        evaluation = gym_common.recorded_evaluation(self.policy, self.cfg, self.counters)
        solved = evaluation["eval_return_mean"] >= self.cfg.solve_return
        self.done = self.done or (solved and self.cfg.stop_on_solve)
        return evaluation

    def summary(self) -> dict:
        cfg, evals = self.cfg, self.counters["evals"]
        first_solve = next((s for s, r in evals if r >= cfg.solve_return), None)
        summary = {"rung": NAME, "solved": first_solve is not None, "solved_at_env_steps": first_solve,
                   "env_steps": self.counters["env_steps"], "wall_s": self.run.wall_s,
                   "eval_return_mean": evals[-1][1] if evals else None,
                   "best_eval_return_mean": max((r for _, r in evals), default=None), "evals": evals,
                   "seed": cfg.seed}
        torch.save(self.policy.state_dict(), self.run.dir / "policy.pt")
        return summary

    def state(self) -> dict:
        return {"policy": self.policy, "optimizer": self.optimizer, "envs": EpisodeEnvs(self.envs),
                "counters": self.counters}

    def load_state(self, restored: dict) -> None:
        self.counters = restored["counters"]
