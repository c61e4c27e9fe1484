"""Grades Capstone I (capstone1_ppo_cartpole.py in this directory, or in ``$LADDER_EXERCISES``): one test per
property of a PPO that a wrong loop breaks. All take a second or less but ``solves_cartpole``, which trains."""

from pathlib import Path

import pytest

from ladder.graders import exercises_dir
from ladder.graders.capstone_ppo import NOT_IMPLEMENTED, PROPERTIES, grade_file

DIRECTORY = exercises_dir(Path(__file__).parent)


@pytest.mark.parametrize("prop", PROPERTIES)
def test_capstone1(prop):
    status, message = grade_file(DIRECTORY, prop)
    if status == NOT_IMPLEMENTED:
        pytest.skip(message)
    if status != "passed":
        pytest.fail(message, pytrace=False)
