"""``--use-exercises``: train with the learner's own functions in place of the core's.

Inside ``with use_exercises():`` every implemented exercise (one whose function does not raise
NotImplementedError on its grader's first case) replaces the function it mirrors in the one table
every call goes through, ``ladder.core.swappable.IMPLEMENTATIONS`` (each mirrored function is
``@swappable``: a thin caller of that table), so whoever holds the function — ``core.gae``, an import by
name, a dict, a ``partial`` — runs the learner's (``tests/test_exercises_escape.py`` checks that no call
escapes). An implementation that fails its grader is swapped in too — training shows what the bug
does — and the one line announcing the swap says so; one that ran past its grader's time limit or called
``sys.exit`` (at import or on a case) is a ``UsageError`` before anything is swapped or trained. Leaving the
block puts the core's functions back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ladder.core.swappable import IMPLEMENTATIONS
from ladder.runtime.errors import UsageError

from . import EXERCISES, Exercise, exercise_imports, exercises_dir
from .grading import NOT_IMPLEMENTED, Result, grade_file


def _put(functions: list[tuple[Exercise, Callable]]) -> None:
    for exercise, function in functions:
        IMPLEMENTATIONS[exercise.function] = function


def announcement(directory: Path, swapped: list[tuple[Exercise, Result]], broken: list[Result],
                 rung: str | None = None) -> str:
    """The one line that says which functions the run takes from the learner."""
    mine = [f"{e.function} ({e.stem[:4]}{'' if r.passed else ', FAILS its grader'})" for e, r in swapped]
    who = f"{rung} trains with" if rung else "using"
    line = f"--use-exercises ({directory}): " + (f"{who} your {', '.join(mine)}" if mine else
                                                 "nothing implemented yet, training with the core's functions")
    if broken:
        line += "; left out: " + ", ".join(r.message.splitlines()[0] for r in broken)
    mine_names = {e.function for e, _ in swapped}
    others = [e.function for e in calls(rung) if e.function not in mine_names]
    if mine and others:
        line += f"; the core's own {', '.join(others)}"
    if mine:
        line += ". A run that learns is no proof that they are right; pytest exercises/ is"
    return line


def calls(rung: str | None) -> list[Exercise]:
    """The exercises swapped in for ``rung``: those on its path from batch to optimiser step (None: all)."""
    return [e for e in EXERCISES if e.swap and (rung is None or rung in e.rungs)]


def _graded(directory: Path, rung: str | None) -> Iterator[tuple[Exercise, Result]]:
    """Each exercise ``rung`` calls with its grade; the first that hung or called sys.exit is a UsageError."""
    for exercise in calls(rung):
        result = grade_file(directory, exercise)
        if result.fatal:
            raise UsageError(f"--use-exercises: {exercise.stem}: {result.message.splitlines()[0]}")
        yield exercise, result


@contextmanager
def use_exercises(directory: str | Path | None = None, enabled: bool = True,
                  say: Callable[[str], object] = print, rung: str | None = None) -> Iterator[list[Result]]:
    """Swap the learner's implemented exercise functions into ladder for the ``with`` block.

    ``directory`` defaults to ``$LADDER_EXERCISES`` or ``exercises/``; ``rung`` limits the swap to the
    functions that rung calls (None: every exercise). Yields the grades of the functions swapped in.
    With ``enabled=False`` nothing happens. Raises ``UsageError`` (before any swap) when an exercise hangs
    or calls ``sys.exit`` in its grader.
    """
    if not enabled:
        yield []
        return
    directory = exercises_dir(directory)
    if not directory.is_dir():
        raise UsageError(f"--use-exercises: no exercises directory at {directory} (set LADDER_EXERCISES)")
    implemented = [(e, r) for e, r in _graded(directory, rung) if r.status != NOT_IMPLEMENTED]
    swapped = [(e, r) for e, r in implemented if r.function is not None]
    broken = [r for _, r in implemented if r.function is None]          # missing, or does not import
    say(announcement(directory, swapped, broken, rung))
    _put([(e, r.function) for e, r in swapped])
    try:
        with exercise_imports(directory):   # an import inside a learner's function finds their own files
            yield [r for _, r in swapped]
    finally:
        _put([(e, e.core) for e, _ in swapped])
