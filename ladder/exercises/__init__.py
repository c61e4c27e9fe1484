"""Exercises: re-derive the core's math, get it graded against the core, then train with it.

    exercises/exNN_*.py   stubs for the learner, each with the signature of the core function it mirrors
    solutions/exNN_*.py   readable reference answers
    ladder.core           the oracle: every grade compares with the core's own function

``grading.grade`` checks one function against the core on hand-picked and random cases;
``swap.use_exercises`` puts the learner's implemented functions into the core for one run
(``python -m ladder.run RUNG --use-exercises``). ``$LADDER_EXERCISES`` points both at another
directory (``solutions`` to see them pass).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Exercise:
    stem: str           # exercises/<stem>.py
    function: str       # the function it mirrors, same name and signature
    module: str         # the module that defines it: ladder.core.<module>, or a dotted path ("ladder.rungs.grpo")
    swap: bool = True   # used by --use-exercises
    rungs: tuple[str, ...] = ()   # the rungs whose path from batch to optimiser step can call it

    @property
    def core(self):
        """The package's own function: the grader's oracle (captured before any swap)."""
        return ORIGINALS[self.function]


ALL = ("reinforce", "cartpole", "ppo-sentiment", "grpo", "agent")
LM = ("ppo-sentiment", "grpo", "agent")
GRPO = ("grpo", "agent")   # the agent rung is GRPO on multi-turn trajectories: its step, update and options

EXERCISES = (
    Exercise("ex01_discounted_returns", "discounted_returns", "advantages", rungs=("reinforce",)),
    Exercise("ex02_reinforce_loss", "pg_loss", "losses", rungs=("reinforce",)),
    Exercise("ex03_gae", "gae", "advantages", rungs=("cartpole",)),
    Exercise("ex04_whiten", "whiten", "advantages", rungs=("reinforce", "cartpole", "ppo-sentiment")),
    Exercise("ex05_clipped_surrogate", "clipped_surrogate", "losses", rungs=("cartpole", *LM)),
    Exercise("ex06_value_loss", "value_loss", "losses", rungs=("cartpole", "ppo-sentiment")),
    # Exercise 7 is kl_estimate without old_logp; exercise 8 completes it, and is the one swapped in.
    Exercise("ex07_kl_estimators", "kl_estimate", "kl", swap=False),
    Exercise("ex08_kl_corrected", "kl_estimate", "kl", rungs=LM),
    Exercise("ex09_kl_rewards", "kl_penalized_rewards", "kl", rungs=("ppo-sentiment",)),
    Exercise("ex10_group_relative", "group_relative", "advantages", rungs=GRPO),
    Exercise("ex11_aggregate", "aggregate", "losses", rungs=ALL),
    # GRPO's design space: GSPO's ratio, RLOO's advantage, the KL in the reward, a moving π_ref.
    Exercise("ex12_sequence_ratio", "sequence_log_ratio", "losses", rungs=GRPO),
    Exercise("ex13_leave_one_out", "leave_one_out", "advantages", rungs=GRPO),
    Exercise("ex14_kl_in_reward", "kl_in_reward", "kl", rungs=GRPO),
    Exercise("ex15_soft_update", "soft_update", "reference", rungs=LM),   # in place: graded on what it changes
    # The loop itself: every line from a batch to an optimiser step, then one whole GRPO step.
    Exercise("ex16_token_logp", "token_logp", "logprobs", rungs=LM),
    Exercise("ex17_compute_loss", "compute_loss", "update", rungs=ALL),  # graded on a small policy: loss, gradient
    Exercise("ex18_update", "update", "update", rungs=ALL),              # graded by training: the parameters after
    Exercise("ex19_masked_gae", "masked_gae", "advantages", rungs=("ppo-sentiment",)),
    Exercise("ex20_grpo_step", "grpo_step", "ladder.rungs.grpo", rungs=GRPO),   # the rung's step, tiny LM
    # The fourth policy: the sampler's weight π_old/π_sampler (core.sampler_correction calls it, inside ex17's loss).
    Exercise("ex21_sampler_weights", "sampler_weights", "sampler", rungs=GRPO),
    # The agent rung's rollout: a trajectory's two masks, then the multi-turn loop on one cache.
    Exercise("ex22_trajectory_tensors", "trajectory_tensors", "ladder.rungs.agent_rollout", rungs=("agent",)),
    Exercise("ex23_multi_turn", "multi_turn", "ladder.rungs.agent_rollout", rungs=("agent",)),
    # TRL 1.16's design space: SAPO's soft gate (a row of core.POLICY_TERMS), GDPO's per-reward normalisation.
    Exercise("ex24_soft_gate", "soft_gated_surrogate", "losses", rungs=GRPO),
    Exercise("ex25_decoupled_advantages", "decoupled_group_relative", "advantages", rungs=GRPO),
)


def module_path(exercise: Exercise) -> str:
    return exercise.module if "." in exercise.module else f"ladder.core.{exercise.module}"


# The core's own functions (``.core`` of each ``@swappable`` caller), whatever a swap has put in their place.
ORIGINALS = {e.function: getattr(importlib.import_module(module_path(e)), e.function).core for e in EXERCISES}


def exercises_dir(default: str | Path | None = None) -> Path:
    """``$LADDER_EXERCISES`` if set, else ``default``, else ./exercises, else the repository's."""
    if os.environ.get("LADDER_EXERCISES"):
        return Path(os.environ["LADDER_EXERCISES"]).resolve()
    if default is not None:
        return Path(default).resolve()
    here = Path.cwd() / "exercises"
    return here.resolve() if here.is_dir() else ROOT / "exercises"


SHEET = re.compile(r"ex\d\d_\w+")


@contextmanager
def exercise_imports(directory: str | Path) -> Iterator[None]:
    """Inside it, ``import ex05_clipped_surrogate`` (at the top of a sheet or inside a function) finds the
    file in ``directory`` — the learner's own, never another copy that happens to be on ``sys.path`` —
    as a fresh module; outside it, the names are as they were."""
    folder = str(Path(directory).resolve())
    cached = {name: sys.modules.pop(name) for name in [n for n in sys.modules if SHEET.fullmatch(n)]}
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)
        for name in [n for n in sys.modules if SHEET.fullmatch(n)]:   # the sheets imported inside
            del sys.modules[name]
        sys.modules.update(cached)


def load(path: Path) -> ModuleType:
    """Import one exercise file by its path (a fresh module each time, not added to sys.modules); the
    earlier exercises it imports come from the same directory (``exercise_imports``)."""
    path = Path(path).resolve()
    with exercise_imports(path.parent):
        spec = importlib.util.spec_from_file_location(f"_ladder_exercise_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module
