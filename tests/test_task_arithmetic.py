"""Rule rewards and answer extraction for the math rung."""

import json

import pytest
import torch

from ladder.runtime.runlog import UsageError
from ladder.tasks import arithmetic as A
from ladder.tasks import math_problems


@pytest.mark.parametrize("text, expected", [
    ("so the total is 5 + 7 = 12\n#### 12", 12.0),
    ("#### 1,234", 1234.0),
    ("#### $1,234.50.", 1234.5),
    ("She pays 72 dollars.\n#### 72 dollars.", 72.0),
    ("#### -5", -5.0),
    ("first #### 3 then corrected\n#### 4", 4.0),          # the last final-answer line wins
    ("The answer is 42.", 42.0),                          # no '####': the last number
    ("3 apples and 4 pears make 7.", 7.0),
    ("I don't know", None),
    ("", None),
    ("#### 0.5", 0.5),
])
def test_extract_answer_tricky_strings(text, expected):
    assert A.extract_answer(text) == expected


def test_gold_answer_from_gsm8k_solution():
    assert A.gold_answer("She has 3 + 4 = <<3+4=7>>7 apples.\n#### 7") == "7"
    assert A.gold_answer("Total: 1,000 + 200\n#### 1,200") == "1200"


def test_correctness_reward():
    completions = ["#### 12", "#### 12.0", "12", "#### 13", "no idea", "#### 1,200 dollars."]
    answers = ["12", "12", "12", "12", "12", "1200"]
    assert A.correctness_reward(completions, answers) == [1.0, 1.0, 1.0, 0.0, 0.0, 1.0]


def test_format_reward_wants_a_final_answer_line():
    completions = ["3 + 4 = 7\n#### 7", "#### 7.", "the answer is 7", "#### 7 apples", "#### seven", "#### 7\n"]
    assert A.format_reward(completions, [""] * 6) == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]


def test_synthetic_split_holds_out_evaluation_problems():
    train, held_out = A.train_eval_split(500, 100)
    assert len(train) == 500 and len(held_out) == 100
    assert not {p["question"] for p in train} & {p["question"] for p in held_out}
    assert A.train_eval_split(500, 100) == (train, held_out)  # fixed
    for p in train[:50]:
        assert A.correctness_reward([A.solution_text(p)], [p["answer"]]) == [1.0]
        assert A.format_reward([A.solution_text(p)], [p["answer"]]) == [1.0]


def test_column_addition_and_the_forgotten_carry():
    assert A.column_addition(37, 45) == "7 + 5 = 12\n3 + 4 + 1 = 8\n#### 82"
    assert A.column_addition(37, 45, carry=False) == "7 + 5 = 12\n3 + 4 + 0 = 7\n#### 72"
    assert A.column_addition(99, 99) == "9 + 9 = 18\n9 + 9 + 1 = 19\n#### 198"
    for a, b in [(12, 34), (37, 45), (50, 50), (99, 10), (91, 19)]:
        sloppy = A.column_addition(a, b, carry=False)
        assert A.format_reward([sloppy], [""]) == [1.0]
        # forgetting the carry is wrong exactly when the units overflow
        assert A.correctness_reward([sloppy], [str(a + b)]) == [float(a % 10 + b % 10 < 10)]


def test_tiny_math_build_leaves_the_callers_rng_and_threads_alone(tmp_path):
    torch.manual_seed(123)
    state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    A.build_tiny_math_model(tmp_path / "m", sft_steps=2)
    assert torch.equal(torch.random.get_rng_state(), state) and torch.get_num_threads() == threads
    assert (tmp_path / "m" / "config.json").exists() and (tmp_path / "m" / "tokenizer.json").exists()


def test_load_gsm8k_from_local_jsonl(tmp_path):
    rows = [{"question": "Tom has 2 apples and buys 3. How many?", "answer": "2 + 3 = <<2+3=5>>5\n#### 5"},
            {"question": "A pen costs $1,200 cents...", "answer": "#### 1,200"}]
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    problems = math_problems.load_gsm8k(str(path))
    assert problems == [{"question": rows[0]["question"], "answer": "5"},
                        {"question": rows[1]["question"], "answer": "1200"}]


@pytest.mark.parametrize("content, needle", [
    ("", "no rows"),
    ("{not json", "not valid JSON"),
    ('{"q": 1}\n', "line 1: no 'question' field"),
])
def test_bad_dataset_files_are_one_line_errors(tmp_path, content, needle):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(UsageError, match=needle):
        math_problems.load_gsm8k(str(path))
