"""Rung 4: GRPO, as a package — the one update (``step``: ``grpo_step`` on a ``Step``), the recipe the loop runs and
what a run loads and writes (``recipe``), its options (``options``: one field per choice), the typed specs they hold
(``problems``, ``ratio``, ``optimisation``, ``generation``, ``efficiency``, ``loss_types``, ``kl_to_ref``, ``sampler``,
``reference_refresh``, ``entropy_control``, ``advantage_spec``, ``scoring``), every ``auto`` decided once
(``settle``), what they mean to ``ladder.core`` (``core_settings``) and the rules between them (``rules``), the
rollout (``rollout``), what a step records (``record``), the lagging π_rollout (``staleness``) and what a run loads
around its training (``setup``).

``ladder.rungs.grpo`` reads as the rung module ``python -m ladder.run`` expects (``ladder.rungs.protocol.RungCode``,
its declaration ``RUNG``): the names below are the rung's.
"""

from ladder.policies import quant
from ladder.rungs.grpo.core_settings import update_config
from ladder.rungs.grpo.loss_types import LOSS_TYPES
from ladder.rungs.grpo.options import ALGOS, PRESETS, RESOLVED, Config, reward_weights
from ladder.rungs.grpo.recipe import (
    CURVES,
    GRPO,
    NAME,
    RUNG,
    Task,
    build,
    held_out_accuracy,
    load_policy,
    math_task,
    task_recipe,
    train,
    train_on,
)
from ladder.rungs.grpo.record import CutOffWatch, batch_statistics, completion_rows
from ladder.rungs.grpo.rollout import sample
from ladder.rungs.grpo.rules import validate
from ladder.rungs.grpo.setup import load_task
from ladder.rungs.grpo.step import (
    Collected,
    Step,
    batch_advantages,
    group_advantages,
    grpo_batch,
    grpo_step,
    loss_normaliser,
    make_step,
    same_for_every_token,
    sample_completions,
    sample_groups,
)
from ladder.tasks.math_problems import ProblemStream

__all__ = [
    "ALGOS", "CURVES", "Collected", "GRPO", "LOSS_TYPES", "NAME", "PRESETS", "RESOLVED", "RUNG", "Config",
    "CutOffWatch", "ProblemStream", "Step", "Task", "batch_advantages", "batch_statistics", "build",
    "completion_rows", "group_advantages", "grpo_batch", "grpo_step", "held_out_accuracy", "load_policy",
    "load_task", "loss_normaliser", "make_step", "math_task", "quant", "reward_weights", "same_for_every_token",
    "sample", "sample_completions", "sample_groups", "task_recipe", "train", "train_on", "update_config", "validate",
]
