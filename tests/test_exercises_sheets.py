"""The exercise sheets (exercises/) and their solutions (solutions/): one per exercise in notebook order, the
core's signature, and a docstring with the equation, the shapes and a worked example that holds."""

from __future__ import annotations

import doctest
import inspect
from pathlib import Path

import pytest
import torch

from ladder.graders import EXERCISES, load

ROOT = Path(__file__).resolve().parents[1]
IDS = [e.stem for e in EXERCISES]


def test_at_least_twenty_one_exercises_in_notebook_order():
    assert len(EXERCISES) >= 21
    assert [e.stem for e in EXERCISES] == sorted(e.stem for e in EXERCISES)
    for folder in ("exercises", "solutions"):
        assert {f"{e.stem}.py" for e in EXERCISES} <= {p.name for p in (ROOT / folder).glob("ex*.py")}


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_same_signature_as_the_core(folder, exercise):
    module = load(ROOT / folder / f"{exercise.stem}.py")
    mine, core = inspect.signature(getattr(module, exercise.function)), inspect.signature(exercise.core)
    assert [(p.name, p.kind, p.default) for p in mine.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in core.parameters.values()]
    assert module.__doc__


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_exercise_docstring_has_equation_shapes_and_a_worked_example_that_holds(exercise):
    """The ``>>>`` examples of each exercise sheet, run against its solution."""
    doc = load(ROOT / "exercises" / f"{exercise.stem}.py").__doc__
    assert "[B, T]" in doc or "[N]" in doc
    where = exercise.module if "." in exercise.module else "ladder.core"
    assert f"Mirrors ``{where}.{exercise.function}``" in doc
    solution = getattr(load(ROOT / "solutions" / f"{exercise.stem}.py"), exercise.function)
    test = doctest.DocTestParser().get_doctest(doc, {"torch": torch, exercise.function: solution},
                                               exercise.stem, None, 0)
    assert test.examples
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0

