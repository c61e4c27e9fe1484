"""Rung 4: GRPO, as a package — the rung (``rung``: the step, the recipe, the run), its options (``options``), the
typed specs they hold (``loss_types``, ``kl_to_ref``, ``sampler``, ``reference_refresh``, ``entropy_control``,
``advantages``, ``scoring``), what they mean to ``ladder.core`` (``core_settings``) and the rules between them
(``rules``), the rollout (``rollout``), what a step records (``record``), the lagging π_rollout (``staleness``) and
what a run loads and writes around its training (``setup``).

``ladder.rungs.grpo`` reads as the rung module ``python -m ladder.run`` expects (see ``ladder.rungs.protocol``):
the names below are the rung's.
"""

from ladder.rungs.grpo.rung import (
    ALGOS,
    LOSS_TYPES,
    NAME,
    PRESETS,
    RESOLVED,
    WRITES,
    Config,
    CutOffWatch,
    ProblemStream,
    Step,
    Task,
    batch_advantages,
    build,
    completion_rows,
    export,
    group_advantages,
    grpo_step,
    load_policy,
    load_task,
    loss_normaliser,
    quant,
    recipe,
    reward_weights,
    same_for_every_token,
    sample,
    sample_completions,
    sample_groups,
    set_learning_rate,
    task_step,
    train,
    train_task,
    update_config,
    validate,
)

__all__ = [
    "ALGOS", "LOSS_TYPES", "NAME", "PRESETS", "RESOLVED", "WRITES", "Config", "CutOffWatch", "ProblemStream", "Step",
    "Task", "batch_advantages", "build", "completion_rows", "export", "group_advantages", "grpo_step", "load_policy",
    "load_task", "loss_normaliser", "quant", "recipe", "reward_weights", "same_for_every_token", "sample",
    "sample_completions", "sample_groups", "set_learning_rate", "task_step", "train", "train_task", "update_config",
    "validate",
]
