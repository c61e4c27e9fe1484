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


# --- one sheet named on the command line: ``cd exercises && pytest ex26_bradley_terry.py`` (or ``pytest ex26*``) ---

SHEETS = {e.stem: e for e in EXERCISES}


def _named(config, path) -> bool:
    """Whether ``path`` was given on the command line itself (not reached by collecting a directory)."""
    here = config.invocation_params.dir
    return any((here / arg.split("::")[0]).resolve() == path.resolve() for arg in config.args)


def pytest_collect_file(file_path, parent):
    """A sheet named on the command line is graded alone, as ``test_grades.py`` grades it, with its own line in the
    table; a directory collected whole is graded by ``test_grades.py`` only."""
    if file_path.suffix == ".py" and file_path.stem in SHEETS and _named(parent.config, file_path):
        return Sheet.from_parent(parent, path=file_path)
    return None


class Sheet(pytest.File):
    def collect(self):
        yield SheetGrade.from_parent(self, name=f"test_exercise[{self.path.stem}]", exercise=SHEETS[self.path.stem])


class SheetGrade(pytest.Item):
    """The grade of one sheet, in the directory it was named in."""

    def __init__(self, *, exercise, **kwargs):
        super().__init__(**kwargs)
        self.exercise = exercise

    def runtest(self):
        from ladder.graders.grading import NOT_IMPLEMENTED, grade_file

        result = grade_file(self.path.parent, self.exercise)
        self.config.stash[GRADES][result.exercise] = result
        if result.status == NOT_IMPLEMENTED:
            pytest.skip(result.message)
        if not result.passed:
            pytest.fail(f"{self.exercise.stem}: {result.message}", pytrace=False)

    def reportinfo(self):
        return self.path, None, self.name
