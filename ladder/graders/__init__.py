"""Exercises: re-derive the core's math, get it graded against the core, then train with it.

    exercises/exNN_*.py   stubs for the learner, each with the signature of the core function it mirrors
    solutions/exNN_*.py   readable reference answers
    ladder.core           the oracle: every grade compares with the core's own function

``grading.grade`` checks one function against the core on hand-picked and random cases;
``swap.use_exercises`` puts the learner's implemented functions into the core for one run
(``python -m ladder.run RUNG --use-exercises``). ``$LADDER_EXERCISES`` points both at another
directory (``solutions`` to see them pass).

A learner's code runs under a time limit (``limit_s``): each import of a sheet, each case of an exercise,
each property of a capstone. Running past it, or calling ``sys.exit``, stops that grade with one line saying
which function did it, where, and on which case (never the grader's process).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ladder.rungs import registry
from ladder.runtime.errors import UsageError
from ladder.runtime.limits import TimedOut, time_limit

ROOT = Path(__file__).resolve().parents[2]


# The time a learner's code gets: for one import of a sheet, one case of an exercise or one property of a
# capstone, LIMIT_S; for a capstone's training check, TRAINING_LIMITS × LIMIT_S. The slowest correct answers take
# about 2 s and 30 s here (exercise 20's cases; Capstone II's train_learns). $LADDER_EXERCISE_LIMIT_S sets LIMIT_S.
LIMIT_S = 60.0
TRAINING_LIMITS = 10
LIMIT_VARIABLE = "LADDER_EXERCISE_LIMIT_S"


def limit_s(training: bool = False) -> float:
    """Seconds for one import, case or property (``training``: a whole training run); 0 means no limit."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    try:
        seconds = float(text) if text else LIMIT_S
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise UsageError(f"{LIMIT_VARIABLE}={text!r}: expected a number of seconds (0: no limit)")
    return seconds * (TRAINING_LIMITS if training else 1)


class Stopped(Exception):
    """A learner's sheet stopped its own import: it called ``sys.exit`` or ran past its limit. The message is
    the one line that says so."""


def exit_call(error: SystemExit) -> str:
    """'sys.exit(3)': the call that raised ``error``, as the learner wrote it (near enough)."""
    return f"sys.exit({'' if error.code is None else repr(error.code)})"


def innermost(error: BaseException, files: set[str]) -> traceback.FrameSummary | None:
    """The innermost frame of ``error``'s traceback that is in one of ``files`` (None: none is)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in files]
    return frames[-1] if frames else None


@dataclass(frozen=True)
class Exercise:
    stem: str           # exercises/<stem>.py
    function: str       # the function it mirrors, same name and signature
    module: str         # the module that defines it: ladder.core.<module>, or a dotted path ("ladder.rungs.grpo")
    swap: bool = True   # used by --use-exercises

    @property
    def rungs(self) -> tuple[str, ...]:
        """The rungs whose path from batch to optimiser step can call it: each rung declares its exercises
        (``Rung.exercises``)."""
        return tuple(name for name, rung in registry.rungs().items() if self.stem in rung.RUNG.exercises)

    @property
    def core(self):
        """The package's own function: the grader's oracle (captured before any swap)."""
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
    Exercise("ex15_soft_update", "soft_update", "reference"),   # in place: graded on what it changes
    # The loop itself: every line from a batch to an optimiser step, then one whole GRPO step.
    Exercise("ex16_token_logp", "token_logp", "logprobs"),
    Exercise("ex17_compute_loss", "compute_loss", "update"),  # graded on a small policy: loss, gradient
    Exercise("ex18_update", "update", "update"),              # graded by training: the parameters after
    Exercise("ex19_masked_gae", "masked_gae", "advantages"),
    Exercise("ex20_grpo_step", "grpo_step", "ladder.rungs.grpo"),   # the rung's step, tiny LM
    # The fourth policy: the sampler's weight π_old/π_sampler (core.sampler_correction calls it, inside ex17's loss).
    Exercise("ex21_sampler_weights", "sampler_weights", "off_policy"),
    # The agent rung's rollout: a trajectory's two masks, then the multi-turn loop on one cache.
    Exercise("ex22_trajectory_tensors", "trajectory_tensors", "ladder.rungs.agent.rollout"),
    Exercise("ex23_multi_turn", "multi_turn", "ladder.rungs.agent.rollout"),
    # TRL 1.16's design space: SAPO's soft gate (core.SoftGate's term), GDPO's per-reward normalisation.
    Exercise("ex24_soft_gate", "soft_gated_surrogate", "losses"),
    Exercise("ex25_decoupled_advantages", "decoupled_group_relative", "advantages"),
    # Where the reward comes from: a reward model's Bradley–Terry loss, and DPO's (the objectives BradleyTerry, DPO).
    Exercise("ex26_bradley_terry", "bradley_terry_loss", "preferences"),
    Exercise("ex27_dpo_loss", "dpo_loss", "preferences"),
    # Learning from a teacher: the per-token reward of on-policy distillation, and GKD's generalized JSD.
    Exercise("ex28_distillation_rewards", "distillation_rewards", "distillation"),
    Exercise("ex29_generalized_jsd", "generalized_jsd", "distillation"),
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
    earlier exercises it imports come from the same directory (``exercise_imports``).

    Raises ``Stopped`` when the import (of this sheet, or of one it imports) calls ``sys.exit`` or runs past
    ``limit_s()``, naming the sheet and line; any other error of the sheet's passes through as it is."""
    path = Path(path).resolve()
    with exercise_imports(path.parent):
        spec = importlib.util.spec_from_file_location(f"_ladder_exercise_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        what = f"the import of {path.name}"
        try:
            with time_limit(limit_s(), what):
                spec.loader.exec_module(module)
        except SystemExit as e:
            sheet, line = _sheet_and_line(e, path)
            raise Stopped(f"{sheet} called {exit_call(e)} at import{line}") from None
        except TimedOut as e:
            if e.what != what:   # an outer limit's: not this import's to report
                raise
            sheet, line = _sheet_and_line(e, path)
            raise Stopped(f"{sheet} did not finish importing within {e.seconds:g} s{line}") from None
    return module


def _sheet_and_line(error: BaseException, path: Path) -> tuple[str, str]:
    """('ex03_gae.py', ' (line 4)'): the innermost line of a sheet beside ``path`` that the error went through
    (a sheet that ``path`` imports, or ``path`` itself)."""
    frame = innermost(error, {str(p) for p in path.parent.glob("*.py")})
    return (Path(frame.filename).name, f" (line {frame.lineno})") if frame else (path.name, "")
