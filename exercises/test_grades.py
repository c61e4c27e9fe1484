"""Grades the exercises in this directory (or in ``$LADDER_EXERCISES``) against ``ladder.core``."""

from pathlib import Path

import pytest

from ladder.graders import EXERCISES, exercises_dir
from ladder.graders.grading import NOT_IMPLEMENTED, grade_file

DIRECTORY = exercises_dir(Path(__file__).parent)


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.stem for e in EXERCISES])
def test_exercise(exercise, report_grade):
    result = grade_file(DIRECTORY, exercise)
    report_grade(result)
    if result.status == NOT_IMPLEMENTED:
        pytest.skip(result.message)
    if not result.passed:
        pytest.fail(f"{exercise.stem}: {result.message}", pytrace=False)
