"""Rung 2: PPO on CartPole — actor-critic MLP, gymnasium vector envs, GAE, μ passes.

Each update: N envs × T steps of experience → GAE advantages on the ``[N, T]`` rollout →
``Batch`` of single transitions → ``ladder.core.update`` (clipped surrogate + value loss).
"""

# The package: the recipe the loop runs, ``train`` and the declaration ``RUNG`` (``recipe``), the options and the
# ``core.UpdateConfig`` they make (``options``), and the N×T rollout (``rollout``: ``collect``).

from ladder.rungs.cartpole.options import ALGOS, PRESETS, RESOLVED, Config, update_config, validate
from ladder.rungs.cartpole.recipe import CURVES, NAME, RUNG, CartPolePPO, build, train
from ladder.rungs.cartpole.rollout import collect

__all__ = ["ALGOS", "CURVES", "NAME", "PRESETS", "RESOLVED", "RUNG", "CartPolePPO", "Config", "build", "collect",
           "train", "update_config", "validate"]
