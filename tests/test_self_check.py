"""The notebooks' closing self-checks: right within the tolerance, wrong outside it, unanswered is neither."""

import pytest

from ladder.viz import SelfCheck


def test_marks_right_wrong_and_unanswered(capsys):
    quiz = SelfCheck(std=("the ratio's std?", 0.042), steps=("steps to solve?", 5120))
    assert quiz.check(std=0.0425, steps=6000) is None           # a notebook echoes nothing
    assert quiz.marks == {"std": True, "steps": False}
    quiz.check(std=None)
    assert quiz.marks == {"std": None, "steps": None}
    out = capsys.readouterr().out
    assert "right" in out and "not 6000: look again" in out and "not answered yet" in out
    assert quiz.ask() is None and quiz.reveal() is None
    assert capsys.readouterr().out.splitlines()[-1] == "steps                    5120"


def test_refuses_unknown_names_and_non_finite_truths():
    quiz = SelfCheck(std=("?", 1.0))
    with pytest.raises(ValueError, match="no question named nope"):
        quiz.check(nope=1)
    with pytest.raises(ValueError, match="not a finite number"):
        SelfCheck(x=("?", float("nan")))
    with pytest.raises(ValueError):
        SelfCheck()
