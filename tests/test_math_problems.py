"""ladder.tasks.math_problems: one held-out split for the grpo rung, the eval command and --export-trl."""

import json
import random

import pytest
from cli_helpers import run_cli

from ladder.rungs import grpo
from ladder.runtime.runlog import UsageError
from ladder.tasks import math_eval, math_problems

ROWS = [{"question": f"What is {a} + 1?", "answer": f"{a}+1={a + 1}\n#### {a + 1}"} for a in range(20)]


def _rows_file(tmp_path, n: int = len(ROWS)) -> str:
    path = tmp_path / f"rows{n}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:n]))
    return str(path)


def _questions(problems) -> list[str]:
    return [p["question"] for p in problems]


def test_arithmetic_held_out_set_is_the_first_sums_of_the_fixed_shuffle():
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(0).shuffle(pairs)
    train, held_out = math_problems.split("arithmetic", None, 200)
    assert _questions(held_out) == [f"What is {a} + {b}?" for a, b in pairs[:200]]
    assert _questions(held_out)[:3] == ["What is 25 + 60?", "What is 31 + 51?", "What is 53 + 98?"]
    assert _questions(train) == [f"What is {a} + {b}?" for a, b in pairs[200:]]
    assert [p["answer"] for p in held_out[:3]] == ["85", "82", "151"]
    limited, same_held_out = math_problems.split("arithmetic", "ignored", 200, train_size=50)
    assert limited == train[:50] and same_held_out == held_out


@pytest.mark.parametrize("rows, eval_size, n_held_out", [(20, 4, 4), (20, 200, 4), (20, 2, 2), (5, 200, 1),
                                                         (2, 200, 1), (9, 3, 1)])
def test_a_one_split_file_holds_out_its_tail(tmp_path, rows, eval_size, n_held_out):
    train, held_out = math_problems.split("gsm8k", _rows_file(tmp_path, rows), eval_size)
    assert _questions(held_out) == _questions(ROWS[rows - n_held_out:rows])
    assert _questions(train) == _questions(ROWS[:rows - n_held_out])
    assert held_out[0]["answer"] == str(rows - n_held_out + 1)


def test_a_hub_dataset_holds_out_the_head_of_its_test_split(monkeypatch):
    splits = {"train": [{"question": f"t{i}", "answer": str(i)} for i in range(30)],
              "test": [{"question": f"e{i}", "answer": str(i)} for i in range(10)]}
    monkeypatch.setattr(math_problems, "load_gsm8k",
                        lambda dataset, split="train", limit=None: splits[split][:limit] if limit else splits[split])
    train, held_out = math_problems.split("gsm8k", "some/hub-id", 4)
    assert train == splits["train"] and held_out == splits["test"][:4]
    assert math_problems.split("gsm8k", "some/hub-id", 50)[1] == splits["test"]  # all of a shorter test split

    def no_test_split(dataset, split="train", limit=None):
        if split == "test":
            raise UsageError("no test split")
        return splits["train"]

    monkeypatch.setattr(math_problems, "load_gsm8k", no_test_split)
    train, held_out = math_problems.split("gsm8k", "some/hub-id", 4)
    assert train == splits["train"][:-4] and held_out == splits["train"][-4:]


@pytest.mark.parametrize("task, rows, sizes, message", [
    ("arithmetic", 0, dict(eval_size=8100), "--eval-size 8100 leaves no problem to train on: the arithmetic task has "
                                            "8,100 sums; hold out at most 8,099"),
    ("arithmetic", 0, dict(eval_size=200, train_size=7901), "--train-size 7901 is more than the 7900 training "
                                                            "problems of the arithmetic task"),
    ("gsm8k", 5, dict(eval_size=200, train_size=5), r"--train-size 5 is more than the 4 training problems in "
                                                    r"--dataset .*rows5.jsonl \(5 rows, the last 1 held out\)"),
    ("gsm8k", 5, dict(eval_size=200, prompts_per_step=5), "--prompts-per-step 5 is more than the 4 training problems"),
    ("gsm8k", 20, dict(eval_size=4, train_size=2, prompts_per_step=3), "use at most 2 or a larger --train-size"),
    ("gsm8k", 1, dict(eval_size=200), "1 row, nothing left to train on"),
])
def test_sizes_that_do_not_fit_the_data_are_usage_errors(tmp_path, task, rows, sizes, message):
    with pytest.raises(UsageError, match=message):
        math_problems.split(task, _rows_file(tmp_path, rows) if rows else None, **sizes)


def test_resolve_math_model_and_system_prompt():
    assert math_problems.resolve_math_model("some/model") == "some/model"
    assert math_problems.system_prompt("arithmetic") == math_problems.arithmetic.TINY_SYSTEM_PROMPT
    assert math_problems.system_prompt("gsm8k", "Be brief.") == "Be brief."


def test_grpo_and_the_eval_command_hold_out_the_same_rows_of_a_local_file(tmp_path, tiny_qwen, monkeypatch):
    """The eval command scores the file's tail, the rows grpo evaluates on and never trains on."""
    dataset = _rows_file(tmp_path)
    expected = _questions(ROWS[-4:])
    done = run_cli("eval", "--model", tiny_qwen, "--dataset", dataset, "--eval-size", "4", "--max-new-tokens", "2",
                   "--out", str(tmp_path / "eval"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    scored = [json.loads(line)["question"] for line in open(tmp_path / "eval" / "completions.jsonl")]
    assert scored == expected

    evaluated, trained = [], []
    real_accuracy, real_draw = math_eval.accuracy, grpo.ProblemStream.draw

    def accuracy(policy, tokenizer, problems, *args, **kwargs):
        evaluated.append(_questions(problems))
        return real_accuracy(policy, tokenizer, problems, *args, **kwargs)

    def draw(stream, n):
        picked = real_draw(stream, n)
        trained.extend(_questions(picked))
        return picked

    monkeypatch.setattr(math_eval, "accuracy", accuracy)
    monkeypatch.setattr(grpo.ProblemStream, "draw", draw)
    grpo.train(grpo.Config(model=tiny_qwen, dataset=dataset, eval_size=4, steps=4, prompts_per_step=4, group_size=2,
                           max_new_tokens=2, kl_coef=0.0, lora=True, eval_every=0, out=str(tmp_path / "run"),
                           progress=False, print_samples=0, threads=1))
    assert evaluated == [expected, expected]  # before and after training
    assert len(trained) == 16 and set(trained) == set(_questions(ROWS[:16]))  # one pass over the training rows
    assert not set(trained) & set(scored)
