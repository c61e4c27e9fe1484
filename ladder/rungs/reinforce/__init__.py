"""Rung 1: REINFORCE on CartPole — the log-derivative trick with returns-to-go.

Each update: N complete episodes from π_θ, padded into ``[N, T_max]`` with a mask →
returns-to-go G_t → advantages G_t − b(s_t) → ``ladder.core.update`` with the plain
policy-gradient loss −Â·log π_θ, one pass (on-policy: REINFORCE cannot reuse a batch).
"""

# The package: the recipe the loop runs, ``train``, the baselines' advantages and the declaration ``RUNG``
# (``recipe``), the options (``options``), and the N single envs: one complete episode from each, their state a
# checkpoint part (``episodes``).

from ladder.rungs.reinforce.episodes import EpisodeEnvs, collect_episodes
from ladder.rungs.reinforce.options import ALGOS, BASELINES, PRESETS, RESOLVED, Config, validate
from ladder.rungs.reinforce.recipe import CURVES, NAME, RUNG, Reinforce, advantages_for, build, train

__all__ = ["ALGOS", "BASELINES", "CURVES", "NAME", "PRESETS", "RESOLVED", "RUNG", "Config", "EpisodeEnvs",
           "Reinforce", "advantages_for", "build", "collect_episodes", "train", "validate"]
