"""The notebooks' closing self-checks: right within the tolerance, wrong outside it, unanswered is neither."""

import pytest
import torch

from ladder.viz import Predict, Reason, SelfCheck, check_computed, tally


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


# ------------------------------------------------------------------------ predictions and reasons
def test_a_choice_prediction_is_marked_against_the_computed_choice(capsys):
    p = Predict("above or below?", choices=("above", "below"))
    assert p.check("below", why="one sweep moves V one step") is None and p.mark is None
    first = capsys.readouterr().out.splitlines()
    assert first[0].startswith("not answered yet") and first[1] == "computed: below — one sweep moves V one step"
    p.answer = " Below"                          # case and spaces do not matter
    p.check("below")
    assert p.mark is True
    p.answer = "above"
    p.check("below")
    assert p.mark is False and "not right: you said above" in capsys.readouterr().out
    p.answer = "abov"                            # not a choice: not marked, and not an error
    p.check("below")
    assert p.mark is None and "'abov' is not one of 'above', 'below'" in capsys.readouterr().out


def test_a_number_prediction_is_right_within_its_tolerance(capsys):
    p = Predict("V(s_0)?", rtol=0.1)
    p.answer = 1.05
    p.check(1.0)
    assert p.mark is True
    p.answer = 1.2
    p.check(1.0)
    assert p.mark is False
    p.answer = "one"
    p.check(1.0)
    assert p.mark is None and "'one' is not a number" in capsys.readouterr().out


def test_a_whole_number_is_matched_exactly_and_a_real_one_to_three_significant_figures(capsys):
    p = Predict("how many padding entries?")
    for answer, right in ((12, True), (12.0, True), ("12", True), (11, False), (13, False), (11.5, False)):
        p.answer = answer
        p.check(12)
        assert p.mark is right, answer
    p.answer = -1.8
    p.check(torch.tensor(-2.0))                  # a whole number computed in floats is still whole
    assert p.mark is False
    p.answer = 1
    p.check(1 / 3 * 3)                           # float rounding aside
    assert p.mark is True
    for answer, right in ((0.9014, True), (0.901, True), (0.90, True), (1.0, False), (0.85, False), (0.895, False)):
        p.answer = answer
        p.check(0.90139)
        assert p.mark is right, answer
    p.ask()
    assert capsys.readouterr().out.splitlines()[-1].startswith("answer: a number: exactly, if the answer is a whole")


def test_a_question_can_state_its_own_precision(capsys):
    p = Predict("k3 at ℓ = log 3, to 2 decimals?", decimals=2)
    for answer, right in ((0.90, True), (0.904, True), (0.897, True), (0.91, False), (0.89, False), (1.0, False)):
        p.answer = answer
        p.check(0.9014)
        assert p.mark is right, answer
    p.ask()
    assert capsys.readouterr().out.splitlines()[-1] == "answer: a number, to 2 decimals"
    q = Predict("L(θ_old)?", atol=1e-6)          # an explicit tolerance applies to a whole number too
    q.answer = 1e-7
    q.check(3e-17)
    assert q.mark is True and capsys.readouterr().out.splitlines()[-1] == "computed: 0"
    with pytest.raises(ValueError):
        Predict("?", rtol=0.1, decimals=2)


def test_a_reason_is_checked_against_the_key_given_later(capsys):
    q = Reason("why?", "first reason", "second reason", "third reason")
    q.ask()
    assert capsys.readouterr().out.splitlines() == ["why?", "  a) first reason", "  b) second reason",
                                                    "  c) third reason"]
    q.check("b", why="more")
    assert q.mark is None and capsys.readouterr().out.splitlines()[-1] == "computed: b — second reason (more)"
    q.answer = "B"
    q.check("b")
    assert q.mark is True
    q.answer = "c"
    q.check("b")
    assert q.mark is False
    tally(q, Predict("?", choices=(1, 2)))
    assert capsys.readouterr().out.splitlines()[-1] == "0 of 2 right (1 not answered yet)"


def test_a_computed_truth_outside_the_question_is_the_notebook_s_error():
    with pytest.raises(ValueError, match="not one of the choices"):
        Predict("?", choices=("above", "below")).check("equal")
    with pytest.raises(ValueError, match="not a finite number"):
        Predict("?").check(float("nan"))
    with pytest.raises(ValueError, match="not one of the choices"):
        Reason("?", "x", "y").check("c")
    with pytest.raises(ValueError):
        Predict("?", choices=("only",))
    with pytest.raises(ValueError):
        Reason("?", *"abcdefghi")


def test_a_computed_piece_is_checked_within_tolerance_and_unanswered_is_not_an_error(capsys):
    truth = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert check_computed(..., truth, how="the sum") is None
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("not answered yet") and out[-1].endswith("(the sum)")
    assert check_computed(truth + 1e-8, truth) is True
    assert check_computed(truth + 0.5, truth) is False and "off by up to 0.5" in capsys.readouterr().out
    assert check_computed(torch.ones(3), truth) is False and "shape (3,)" in capsys.readouterr().out
    assert check_computed("four", 4.0) is False
    assert check_computed(4.0, 4) is True
