"""ladder.rewards: loading reward functions and calling them safely (one-line errors that name the sample)."""

import time

import pytest
import torch

from ladder import rewards
from ladder.runtime.runlog import UsageError

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
    (lambda c, a: ["high", 0, 0], "returned str 'high' for completion 0: '#### 5'; rewards must be finite numbers"),
    (lambda c, a: [1.0, None, 0.0], "returned None for completion 1: 'no answer'; rewards must be finite numbers"),
    (lambda c, a: ["1", "0", "1"], "returned str '1' for completion 0"),  # text that reads as a number is not one
    (lambda c, a: None, "must return a list of numbers, one per completion, got None"),
    (lambda c, a: "101", "must return a list of numbers, one per completion, got str '101'"),
    (lambda c, a: 1.0, "must return a list of numbers, one per completion, got 1.0"),
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


def test_numbers_of_other_kinds_are_rewards():
    import numpy as np

    values = rewards.call_reward("mine", lambda c, a: [np.float32(0.5), True, torch.tensor(2.0)], COMPLETIONS, ANSWERS)
    assert values.tolist() == [0.5, 1.0, 2.0]


def test_a_reward_function_past_its_limit_is_one_line_and_searched_no_further():
    calls = []

    def slow(completions, answers):
        calls.append(len(completions))
        print("thinking")
        time.sleep(3600)

    start = time.monotonic()
    with pytest.raises(UsageError) as error:
        rewards.call_reward("slow", slow, COMPLETIONS, ANSWERS, seconds=0.2)
    assert str(error.value) == ("reward function 'slow' did not return within 0.2 s on the batch of 3 completions; "
                                "it printed 'thinking'")
    assert calls == [3] and time.monotonic() - start < 3.0  # not called again on each completion alone


def test_reward_timeout_is_the_limit_a_run_passes_and_defaults_to_time_limit_s():
    from ladder.rungs.agent import options as agent_options
    from ladder.rungs.grpo import options as grpo_options

    assert grpo_options.Config().reward_timeout == agent_options.Config().reward_timeout == rewards.TIME_LIMIT_S
    calls = []

    def slow(completions, answers):
        calls.append(len(completions))
        time.sleep(3600)

    with pytest.raises(UsageError, match=r"reward function 'slow' did not return within 0\.2 s"):
        rewards.score(COMPLETIONS, ANSWERS, {"slow": 1.0}, {"slow": slow},
                      seconds=grpo_options.Config(reward_timeout=0.2).reward_timeout)
    assert calls == [3]
