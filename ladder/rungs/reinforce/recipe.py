"""REINFORCE on CartPole as the loop runs it: the declaration ``RUNG``, the curves, Â = G_t − b(s_t) for each
baseline (``advantages_for``), ``train`` and ``build``, and the recipe (``Reinforce``: each update N episodes →
returns-to-go → ``core.update``; greedy evaluations; the summary and policy.pt)."""

from __future__ import annotations

from dataclasses import asdict

import torch

from ladder import core
from ladder.plots import Panel
from ladder.policies.mlp import MLPActorCritic
from ladder.rungs import gym_common
from ladder.rungs.protocol import Rung
from ladder.rungs.reinforce.episodes import EpisodeEnvs, collect_episodes
from ladder.rungs.reinforce.options import Config, validate
from ladder.runtime import loop
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


def advantages_for(cfg: Config, policy: MLPActorCritic, obs, returns, mask):
    """Â_t = G_t − b(s_t) for the chosen baseline."""
    if cfg.baseline == "none":
        return returns
    if cfg.baseline == "whiten":
        return core.whiten(returns, mask)
    with torch.no_grad():
        return (returns - policy.value(obs)) * mask


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
