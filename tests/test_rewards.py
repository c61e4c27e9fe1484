"""ladder.rewards: loading reward functions and calling them safely (one-line errors that name the sample)."""

import pytest

from ladder import rewards
from ladder.runlog import UsageError

COMPLETIONS = ["#### 5", "no answer", "#### 7"]
ANSWERS = ["5", "6", "8"]


def test_builtins_and_weights():
    fns = rewards.load_all("correctness,format")
    assert list(fns) == ["correctness", "format"]
    assert rewards.weights("correctness,format", None) == {"correctness": 1.0, "format": 1.0}
    assert rewards.weights("correctness,format", "2,0.5") == {"correctness": 2.0, "format": 0.5}
    total, per_function = rewards.score(COMPLETIONS, ANSWERS, {"correctness": 2.0, "format": 0.5}, fns)
    assert per_function["correctness"].tolist() == [1.0, 0.0, 0.0]
    assert per_function["format"].tolist() == [1.0, 0.0, 1.0]
    assert total.tolist() == [2.5, 0.0, 0.5]


def test_user_function_from_a_file(tmp_path):
    (tmp_path / "mine.py").write_text("def length(completions, answers):\n    return [len(c) for c in completions]\n")
    name, fn = rewards.load_reward_function(f"{tmp_path / 'mine.py'}:length")
    assert name == "length" and rewards.call_reward(name, fn, COMPLETIONS, ANSWERS).tolist() == [6, 9, 6]


@pytest.mark.parametrize("fn, needle", [
    (lambda c, a: [1 / 0 if "no" in x else 1.0 for x in c], "raised ZeroDivisionError: division by zero on "
                                                          "completion 1: 'no answer'"),
    (lambda c, a: [1.0] * (len(c) - 1), "returned 2 rewards for 3 completions"),
    (lambda c, a: [0.0, float("inf"), 0.0], "returned inf for completion 1: 'no answer'"),
    (lambda c, a: ["high", 0, 0], "must return a list of numbers"),
    (lambda c, a: [][0] if len(c) == 3 else [1.0], "on the batch of 3 completions (each one alone scores fine)"),
])
def test_bad_reward_functions_are_one_line_errors(fn, needle):
    with pytest.raises(UsageError) as error:
        rewards.call_reward("mine", fn, COMPLETIONS, ANSWERS)
    assert needle in str(error.value) and "\n" not in str(error.value)


def test_bad_specs():
    with pytest.raises(UsageError, match="neither a built-in"):
        rewards.load_all("nosuch")
    with pytest.raises(UsageError, match="distinct names"):
        rewards.load_all("correctness,correctness")
    with pytest.raises(UsageError, match="needs 2 numbers"):
        rewards.weights("correctness,format", "1")
