"""``pytest exercises/``: one test per exercise, then a table of grades.

A stub is reported as "not implemented yet" (a skip), a wrong answer as one short failure message
saying on which input, what was expected and what came back (no traceback).
"""

from __future__ import annotations

import pytest

from ladder.graders import EXERCISES

GRADES = pytest.StashKey[dict]()


def pytest_configure(config):
    config.stash[GRADES] = {}


@pytest.fixture
def report_grade(request):
    """Record a ``grading.Result`` for the table at the end."""
    return lambda result: request.config.stash[GRADES].__setitem__(result.exercise, result)


def pytest_terminal_summary(terminalreporter, config):
    grades = config.stash.get(GRADES, {})
    if not grades:
        return
    terminalreporter.section("grades")
    for e in EXERCISES:
        r = grades.get(e.stem)
        if r is not None:
            status = f"passed ({r.cases} cases)" if r.passed else (
                r.message if r.status != "failed" else f"FAILED: {r.message.splitlines()[0]}")
            terminalreporter.line(f"{e.stem:<26} {status}")
    passed = sum(r.passed for r in grades.values())
    terminalreporter.line(f"{passed} of {len(grades)} passed. "
                          "python -m ladder.run RUNG --use-exercises trains with the ones you have implemented.")
