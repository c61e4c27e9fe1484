"""The CartPole PPO rung's options: one ``Config``, the ``tiny`` preset, the one rule between options (``validate``)
and the ``core.UpdateConfig`` they make (``update_config``)."""

from __future__ import annotations

from dataclasses import dataclass

from ladder import core
from ladder.domains import (
    MAX_EPISODES,
    MAX_PASSES,
    MAX_ROWS,
    MAX_SCALE,
    MAX_STEPS,
    Text,
    coefficient,
    count,
    int_range,
    interval,
    learning_rate,
    positive,
    probability,
)
from ladder.options import RunOptions, option
from ladder.rungs.protocol import check_minibatches


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
