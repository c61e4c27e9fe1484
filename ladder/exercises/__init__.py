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
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Exercise:
    stem: str           # exercises/<stem>.py
    function: str       # the core function it mirrors, same name and signature
    module: str         # ladder.core.<module> defines it
    swap: bool = True   # used by --use-exercises

    @property
    def core(self):
        """The core's own function: the grader's oracle (captured before any swap)."""
        return ORIGINALS[self.function]


EXERCISES = (
    Exercise("ex01_discounted_returns", "discounted_returns", "advantages"),
    Exercise("ex02_reinforce_loss", "pg_loss", "losses"),
    Exercise("ex03_gae", "gae", "advantages"),
    Exercise("ex04_whiten", "whiten", "advantages"),
    Exercise("ex05_clipped_surrogate", "clipped_surrogate", "losses"),
    Exercise("ex06_value_loss", "value_loss", "losses"),
    # Exercise 7 is kl_estimate without old_logp; exercise 8 completes it, and is the one swapped in.
    Exercise("ex07_kl_estimators", "kl_estimate", "kl", swap=False),
    Exercise("ex08_kl_corrected", "kl_estimate", "kl"),
    Exercise("ex09_kl_rewards", "kl_penalized_rewards", "kl"),
    Exercise("ex10_group_relative", "group_relative", "advantages"),
    Exercise("ex11_aggregate", "aggregate", "losses"),
    # GRPO's design space: GSPO's ratio, RLOO's advantage, the KL in the reward, a moving π_ref.
    Exercise("ex12_sequence_ratio", "sequence_log_ratio", "losses"),
    Exercise("ex13_leave_one_out", "leave_one_out", "advantages"),
    Exercise("ex14_kl_in_reward", "kl_in_reward", "kl"),
    Exercise("ex15_soft_update", "soft_update", "reference"),   # in place: graded on the tensors it changes
)

ORIGINALS = {e.function: getattr(importlib.import_module(f"ladder.core.{e.module}"), e.function)
             for e in EXERCISES}


def exercises_dir(default: str | Path | None = None) -> Path:
    """``$LADDER_EXERCISES`` if set, else ``default``, else ./exercises, else the repository's."""
    if os.environ.get("LADDER_EXERCISES"):
        return Path(os.environ["LADDER_EXERCISES"]).resolve()
    if default is not None:
        return Path(default).resolve()
    here = Path.cwd() / "exercises"
    return here.resolve() if here.is_dir() else ROOT / "exercises"


def load(path: Path) -> ModuleType:
    """Import one exercise file by its path (a fresh module each time, not added to sys.modules)."""
    spec = importlib.util.spec_from_file_location(f"_ladder_exercise_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
