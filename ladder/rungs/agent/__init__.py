"""Rung 5: agents, as a package — the recipe and the declaration ``RUNG`` (``recipe``: GRPO on multi-turn
trajectories, trained through ``ladder.rungs.grpo``), its options (``options``) and the multi-turn rollout
(``rollout``).

``ladder.rungs.agent`` reads as the rung module ``python -m ladder.run`` expects (see ``ladder.rungs.protocol``):
the names below are the rung's.
"""

from ladder.rungs.agent.recipe import (
    ALGOS,
    NAME,
    PRESETS,
    RESOLVED,
    RUNG,
    Config,
    agent_task,
    build,
    chat_prompt,
    environment,
    multi_turn,
    per_turn_rewards,
    play,
    problems,
    sample_trajectories,
    system_prompt,
    train,
    turn_credit,
    turn_reward_stats,
    validate,
)

__all__ = [
    "ALGOS", "NAME", "PRESETS", "RESOLVED", "RUNG", "Config", "agent_task", "build", "chat_prompt", "environment",
    "multi_turn", "per_turn_rewards", "play", "problems", "sample_trajectories", "system_prompt", "train",
    "turn_credit", "turn_reward_stats", "validate",
]
