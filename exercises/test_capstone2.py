"""Grades capstone II (``capstone2_grpo.py`` in this directory, or in ``$LADDER_EXERCISES``): one test per property.

A property whose functions are still stubs is skipped as "not implemented yet"; a broken one fails with one
or two lines naming the property, the input, what was expected and what came back. The train_* properties
before it watch one short run of ``train`` (two steps: seconds) with a spy on each function of the contract;
``train_learns`` trains the tiny model (about half a minute on one thread); every other property takes seconds.
"""

from pathlib import Path

import pytest

from ladder.graders import Stopped, exercises_dir, load
from ladder.graders.capstone_grpo import NOT_IMPLEMENTED, PROPERTIES, check

SHEET = exercises_dir(Path(__file__).parent) / "capstone2_grpo.py"


@pytest.fixture(scope="module")
def sheet():
    if not SHEET.exists():
        pytest.skip(f"{SHEET} is missing")
    try:
        return load(SHEET)
    except Stopped as e:    # it called sys.exit, or hung, at import
        pytest.fail(str(e), pytrace=False)
    except Exception as e:  # noqa: BLE001 - a sheet that does not import: one line, no traceback
        pytest.fail(f"{SHEET.name} does not import: {type(e).__name__}: {e}", pytrace=False)


@pytest.mark.parametrize("name", PROPERTIES)
def test_capstone2(name, sheet):
    verdict = check(name, sheet)
    if verdict.status == NOT_IMPLEMENTED:
        pytest.skip(NOT_IMPLEMENTED)
    if not verdict.passed:
        pytest.fail(verdict.message, pytrace=False)
