"""The REINFORCE rung's options: one ``Config`` (``--baseline``: one of ``BASELINES``), the ``tiny`` preset and the
one rule between options (``validate``)."""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import (
    MAX_EPISODES,
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
from ladder.runtime.errors import UsageError

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
