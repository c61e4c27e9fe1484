"""Rung 2: PPO on CartPole — actor-critic MLP, gymnasium vector envs, GAE, μ passes.

Each update: N envs × T steps of experience → GAE advantages on the ``[N, T]`` rollout →
``Batch`` of single transitions → ``ladder.core.update`` (clipped surrogate + value loss).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from ladder import core
from ladder.cli import (
    MAX_EPISODES,
    MAX_PASSES,
    MAX_ROWS,
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
from ladder.rungs.protocol import Rung, check_minibatches
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


@dataclass
class Config(RunOptions):
    env_id: str = option("CartPole-v1", "gymnasium environment id (vector obs, discrete actions)", Text())
    total_steps: int = option(100_000, "environment steps to train for at most", count(1, MAX_STEPS))
    num_envs: int = option(8, "parallel environments N (at most 1024)", int_range(1, 1024))
    num_steps: int = option(32, "steps per env per rollout T (batch = N·T transitions; at most 65536)",
                            int_range(1, 65536))
    lr: float = option(2e-3, "Adam learning rate, annealed linearly to 0", learning_rate())
    gamma: float = option(0.98, "discount γ", probability())
    gae_lambda: float = option(0.8, "GAE λ", probability())
    mu: int = option(15, "μ: optimisation passes over each batch", count(1, MAX_PASSES))
    num_minibatches: int = option(1, "shuffled minibatches per pass", count(1, MAX_ROWS))
    clip_eps: float = option(0.2, "PPO clip ε (ratio clipped to [1 − ε, 1 + ε])",
                             interval(0, 1, open_low=True, open_high=True))
    value_coef: float = option(0.5, "value-loss coefficient", coefficient())
    entropy_coef: float = option(0.0, "entropy bonus coefficient", coefficient())
    max_grad_norm: float = option(0.5, "gradient-norm clip", positive(MAX_SCALE))
    target_kl: float | None = option(None, "stop an update's passes once KL(π_old‖π_θ) exceeds this",
                                     positive(MAX_SCALE))
    hidden: int = option(64, "hidden units per layer (at most 65536)", int_range(1, 65536))
    eval_every: int = option(5_000, "evaluate every N env steps", count(1, MAX_STEPS))
    eval_episodes: int = option(20, "greedy episodes per evaluation", count(1, MAX_EPISODES))
    solve_return: float = option(475.0, "evaluation mean that counts as solved (|R| at most 1e9)", interval(-1e9, 1e9))
    stop_on_solve: bool = option(True, "stop once an evaluation reaches --solve-return")
    threads: int = option(1, "torch CPU threads (small MLPs run fastest on one; 0: torch's default; at most 1024)",
                          int_range(0, 1024))


PRESETS = {"tiny": {"total_steps": 20_000, "eval_every": 2_500}}
ALGOS: dict = {}
RESOLVED: dict = {}


def validate(cfg: Config) -> None:
    """Rules that relate several options (each option's domain is checked when the Config is built)."""
    check_minibatches(cfg.num_envs * cfg.num_steps, cfg.num_minibatches,
                      f"a batch of {cfg.num_envs}×{cfg.num_steps} transitions")


def update_config(cfg: Config) -> core.UpdateConfig:
    return core.UpdateConfig(mu=cfg.mu, num_minibatches=cfg.num_minibatches, objective="clipped",
                             clip_eps_low=cfg.clip_eps, value_coef=cfg.value_coef, value_clip=None,
                             entropy_coef=cfg.entropy_coef, normalize_advantages=True,
                             max_grad_norm=cfg.max_grad_norm, target_kl=cfg.target_kl)


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
