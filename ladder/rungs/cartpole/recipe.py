"""PPO on CartPole as the loop runs it: the declaration ``RUNG``, the curves, ``train`` and ``build``, and the recipe
(``CartPolePPO``: each update a rollout → GAE → ``core.update``; greedy evaluations; the summary and policy.pt)."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch

from ladder import core
from ladder.plots import Panel
from ladder.policies.mlp import MLPActorCritic
from ladder.rungs import gym_common
from ladder.rungs.cartpole.options import Config, update_config, validate
from ladder.rungs.cartpole.rollout import collect
from ladder.rungs.protocol import Rung
from ladder.runtime import loop
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession

NAME = "cartpole"
RUNG = Rung(name=NAME, position=2,
            summary="PPO on CartPole (actor-critic, vector envs, GAE)",
            exercises=("ex03_gae", "ex04_whiten", "ex05_clipped_surrogate", "ex06_value_loss", "ex11_aggregate",
                       "ex17_compute_loss", "ex18_update"),
            vitals=("return", "explained", "value_loss", "kl_old", "action_clip", "action_entropy", "grad_norm"))
CURVES = [Panel("episode return", "return (steps balanced)",
                {"episode_return": "training episodes (sampled)",
                 "eval_return_mean": "greedy evaluation ({eval_episodes} episodes)"},
                threshold="{solve_return}", threshold_label="solved (--solve-return {solve_return:g})"),
          Panel("value loss", "value loss", {"value_loss": ""}),
          Panel("explained variance of V", "1 − Var(R − V) / Var(R)", {"explained_variance": ""}),
          Panel("entropy of π_θ", "nats per action", {"entropy": ""}),
          Panel("clip fraction", "share of samples clipped", {"clip_frac": ""}),
          Panel("KL(π_old‖π_θ) in the last pass", "nats (k3 estimate)", {"approx_kl_old_k3": ""})]


def train(cfg: Config) -> dict:
    """Train PPO on CartPole; write metrics.jsonl, summary.json, curves.png and policy.pt into ``cfg.out``."""
    validate(cfg)
    if cfg.threads:  # 0: torch's default
        torch.set_num_threads(cfg.threads)
    return loop.train(cfg, NAME, build)


def build(cfg: Config, run: RunSession) -> Recipe:
    """PPO on CartPole as the loop runs it (``CartPolePPO``)."""
    return CartPolePPO(cfg, run)


class CartPolePPO(Recipe):
    """PPO on CartPole: N envs × T steps → GAE → ``core.update``; the lr annealed linearly to 0, the clock in
    environment steps, a greedy evaluation every ``--eval-every`` of them, done once solved (``--stop-on-solve``)."""

    def __init__(self, cfg: Config, run: RunSession):
        seed_everything(cfg.seed)
        self.cfg, self.run = cfg, run
        self.envs = gym_common.make_vec_env(cfg.env_id, cfg.num_envs)
        obs_dim, n_actions = gym_common.env_dims(cfg.env_id)
        self.policy = MLPActorCritic(obs_dim, n_actions, cfg.hidden).to(cfg.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.lr, eps=1e-5, fused=cfg.device == "cpu")
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.update_cfg = update_config(cfg)
        steps_per_update = cfg.num_envs * cfg.num_steps
        updates = -(-cfg.total_steps // steps_per_update)
        self.plan = loop.Plan(updates=updates, clock="env_steps", total=updates * steps_per_update, unit="step",
                              eval_every=cfg.eval_every, learning_rate=loop.LearningRate(cfg.lr, anneal=updates),
                              curves=tuple(p.filled(**asdict(cfg)) for p in CURVES),
                              bar=(("eval", "eval_return_mean", ".0f"),))
        obs, _ = self.envs.reset(seed=cfg.seed)
        self.counters = {"obs": obs, "env_steps": 0, "evals": [],
                         "episode": {"return": np.zeros(cfg.num_envs), "length": np.zeros(cfg.num_envs),
                                     "finished": []}}

    def update(self) -> dict:
        """One rollout of N×T transitions → GAE advantages → ``core.update``: μ passes of the clipped surrogate."""
        cfg, counters, episode = self.cfg, self.counters, self.counters["episode"]
        counters["obs"], obs_nt, actions, logp, values, rewards, dones, last_values = collect(
            self.policy, self.envs, counters["obs"], cfg, episode)
        advantages, returns = core.gae(rewards, values, dones, cfg.gamma, cfg.gae_lambda, last_values)
        batch = core.Batch(actions=actions, mask=torch.ones_like(rewards), advantages=advantages,
                           old_logp=logp, values=values, rewards=rewards, returns=returns,
                           inputs={"obs": obs_nt}).as_transitions()
        passes = core.update(self.policy, batch, self.optimizer, self.update_cfg, self.generator)
        counters["env_steps"] += cfg.num_envs * cfg.num_steps
        finished, episode["finished"] = episode["finished"], []
        return {"env_steps": counters["env_steps"], "num_passes": len(passes),
                "episode_return": float(np.mean(finished)) if finished else None,
                "episodes": len(finished), "lr": self.optimizer.param_groups[0]["lr"], **passes[-1],
                **core.step_counts(passes, self.update_cfg.num_minibatches)}

    def evaluate(self) -> dict:
        """Greedy episodes; solved (and so done, with ``--stop-on-solve``) once their mean reaches --solve-return."""
        evaluation = gym_common.recorded_evaluation(self.policy, self.cfg, self.counters)
        self.done = self.cfg.stop_on_solve and evaluation["eval_return_mean"] >= self.cfg.solve_return
        return evaluation

    def summary(self) -> dict:
        cfg, evals = self.cfg, self.counters["evals"]
        self.envs.close()
        first_solve = next((s for s, r in evals if r >= cfg.solve_return), None)
        summary = {"rung": NAME, "solved": first_solve is not None, "solved_at_env_steps": first_solve,
                   "env_steps": self.counters["env_steps"], "wall_s": self.run.wall_s,
                   "eval_return_mean": evals[-1][1] if evals else None, "evals": evals, "seed": cfg.seed}
        torch.save(self.policy.state_dict(), self.run.dir / "policy.pt")
        return summary

    def state(self) -> dict:
        return {"policy": self.policy, "optimizer": self.optimizer, "generator": self.generator,
                "envs": gym_common.EnvState(self.envs), "counters": self.counters}

    def load_state(self, restored: dict) -> None:
        self.counters = restored["counters"]
