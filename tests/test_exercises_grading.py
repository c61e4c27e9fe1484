"""The exercise graders: the solutions pass them, stubs are 'not implemented yet', planted bugs are caught,
and a failure says which input, what was expected and what came instead."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from planted_bugs import PLANTED

from ladder.graders import EXERCISES
from ladder.graders.grading import NOT_IMPLEMENTED, grade, grade_file

ROOT = Path(__file__).resolve().parents[1]
BY_STEM = {e.stem: e for e in EXERCISES}
IDS = [e.stem for e in EXERCISES]
pytestmark = pytest.mark.usefixtures("core_grpo_steps_once")   # ex20's oracle: one core GRPO step per case


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_solutions_pass_the_grader_so_equal_the_core(exercise, solutions_graded_once):
    result = solutions_graded_once(ROOT / "solutions", exercise)
    assert result.passed, result.message
    assert result.checks == result.cases >= 5


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_a_stub_is_reported_as_not_implemented(exercise):
    def stub(*args, **kwargs):
        raise NotImplementedError

    result = grade(stub, exercise)
    assert (result.status, result.message) == (NOT_IMPLEMENTED, "not implemented yet")


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_the_shipped_exercise_files_are_stubs(exercise):
    result = grade_file(ROOT / "exercises", exercise)
    if result.status != NOT_IMPLEMENTED:
        pytest.skip(f"{exercise.stem} has been worked on ({result.status})")
    assert result.message == "not implemented yet"


@pytest.mark.parametrize("stem, label", [(s, label) for s, bugs in PLANTED.items() for label in bugs])
def test_planted_wrong_implementation_is_caught(stem, label):
    result = grade(PLANTED[stem][label], BY_STEM[stem])
    assert result.status == "failed", f"{stem}: the grader let '{label}' pass"
    assert result.message.startswith("case ") and "input" in result.message


def test_every_exercise_has_planted_bugs():
    assert set(PLANTED) == {e.stem for e in EXERCISES}


def test_failure_message_says_input_expected_and_got():
    message = grade(PLANTED["ex03_gae"]["returns = Â (V left out)"], BY_STEM["ex03_gae"]).message
    lines = message.splitlines()
    assert lines[0] == "case 1/11: one step, last_values omitted (no bootstrap)"
    assert lines[1].split() == ["input", "rewards=[[1.0]]", "values=[[0.5]]", "dones=[[0.0]]", "gamma=0.9",
                                "lam=0.95"]
    assert "expected" in message and "got" in message and len(lines) <= 6


def test_shape_error_and_in_place_change_are_explained():
    exercise = BY_STEM["ex02_reinforce_loss"]
    assert "shape [" in grade(lambda logp, advantages: (-advantages * logp).sum(1), exercise).message

    def in_place(logp, advantages):
        advantages.neg_()
        return advantages * logp

    assert "in place" in grade(in_place, exercise).message


def test_errors_in_place_changes_and_detached_inputs_are_explained():
    def message(stem, label):
        return grade(PLANTED[stem][label], BY_STEM[stem]).message

    assert "should raise ValueError, as the core does" in message("ex13_leave_one_out", "group_size 1 not refused")
    assert "raised RuntimeError" in message("ex13_leave_one_out",
                                            "N not a multiple of G: view's RuntimeError, not ValueError")
    assert "in place and return None" in message("ex15_soft_update", "new tensors returned, π_ref left as it was")
    assert "torch.no_grad()" in message("ex15_soft_update", "outside torch.no_grad()")
    assert "detach it" in message("ex14_kl_in_reward", "KL with gradient (not detached, as if π_old were π_θ)")

    def moves_policy(reference, policy, alpha):   # π_ref right, but π_θ overwritten with it
        with torch.no_grad():
            for ref, theta in zip(reference, policy):
                ref.lerp_(theta.to(ref.dtype), alpha)
                theta.copy_(ref)

    assert "changed its input policy in place" in grade(moves_policy, BY_STEM["ex15_soft_update"]).message



def test_ex18_an_update_that_records_pi_old_even_for_one_pass_of_one_minibatch_passes():
    """With μ·M = 1, π_old recorded beforehand and logp.detach() give the same numbers: the grader takes both,
    and the cases where they differ (μ = 1 × M = 2, a π_old given) tell the two bugs apart."""
    from planted_bugs_loop import mutant

    condition = "if batch.old_logp is None and cfg.mu * M > 1:"
    always = mutant("ex18_update", "update", condition, "if batch.old_logp is None:")
    assert grade(always, BY_STEM["ex18_update"]).passed
    only_mu = PLANTED["ex18_update"]["π_old recorded only when μ > 1: with μ = 1, M = 2 the second minibatch's "
                                     "ratio reads 1"]
    assert grade(only_mu, BY_STEM["ex18_update"]).message.startswith("case 3/12: μ = 1 pass × M = 2 minibatches")
    assert grade(PLANTED["ex18_update"]["a given π_old recorded over"],
                 BY_STEM["ex18_update"]).message.startswith("case 4/12: μ = 2 × M = 2, π_old given")
