"""Faults in what a user brings to the preference rungs (``reward-model``, ``dpo``) — pairs the model cannot take,
malformed conversations, a dataset directory without a test split, a path to export to, a model that is not a
reward model — produced for real: a real file, the real command in a subprocess, one line on stderr, exit code 2, no
traceback, and no run directory left behind. Each is refused while loading, before any weights load, so each run
costs its imports. Variants of one check that share its code run in this process through the same loader."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from cli_helpers import run_cli

from ladder.policies.scalar_head import load_classifier
from ladder.runtime.errors import UsageError
from ladder.tasks import arithmetic, preference_pairs, review_models

PLAIN = [{"prompt": "The film was", "chosen": " a delight from start to end.", "rejected": " dull."},
         {"prompt": "The plot", "chosen": " kept me guessing.", "rejected": " was thin."}] * 3


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


CHAT = {"prompt": [user("Is the film good?")], "chosen": [assistant("Yes, a delight.")],
        "rejected": [assistant("No.")]}


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def with_row(rows: list[dict], index: int, row: dict) -> list[dict]:
    """``rows`` with row ``index`` (0-based; line index + 1 of the file) replaced."""
    return [row if i == index else r for i, r in enumerate(rows)]


def _cli(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*shlex.split(command), cwd=cwd)


def _refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit code 2 and one line on stderr that holds every needle; returns the line."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and all(n in lines[0] for n in needles), result.stderr
    return lines[0]


def _run(rung: str, flags: str, tmp_path: Path, *needles: str) -> str:
    """``rung`` with ``flags`` and a few tiny steps, refused in one line; no run directory left."""
    result = _cli(f"{rung} {flags} --steps 2 --batch-size 2 --eval-every 1 --threads 1 --no-progress --out run",
                  tmp_path)
    line = _refused(result, *needles)
    assert not (tmp_path / "run").exists()
    return line


@pytest.fixture(scope="module")
def chat_model() -> str:
    """The shipped tiny Qwen2: a model with a chat template."""
    return str(arithmetic.tiny_math_model())


# --- 1: a pair longer than the model's context ---------------------------------------------------------------------

@pytest.mark.parametrize("rung", ["dpo", "reward-model"])
def test_a_pair_longer_than_the_context_is_one_line_naming_the_row_and_lengths(rung, tmp_path):
    long = {"prompt": " ".join(["word"] * 80), "chosen": " great.", "rejected": " bad."}  # > 64 tokens (n_positions)
    rows = write_jsonl(tmp_path / "pairs.jsonl", with_row(PLAIN, 3, long))
    line = _run(rung, f"--model tiny --dataset {rows} --eval-pairs 1 --num-eval-prompts 0"
                if rung == "dpo" else f"--model tiny --dataset {rows} --eval-pairs 1", tmp_path,
                "line 4: a prompt of", "tokens plus its 'chosen' completion of", "exceeds the model's context of 64")
    assert str(rows) in line


def test_a_sampled_prompt_with_max_new_tokens_beyond_the_context_is_one_line_as_grpo_words_it(tmp_path):
    rows = write_jsonl(tmp_path / "pairs.jsonl", PLAIN)
    _run("dpo", f"--model tiny --dataset {rows} --eval-pairs 2 --num-eval-prompts 2 --max-new-tokens 64", tmp_path,
         "line 5: a prompt of", "tokens plus --max-new-tokens 64 exceeds the model's context of 64 tokens",
         "lower --max-new-tokens")


# --- 2, 5: malformed conversations ---------------------------------------------------------------------------------

def test_an_empty_conversational_completion_is_one_line_naming_row_and_field(chat_model, tmp_path):
    rows = write_jsonl(tmp_path / "empty.jsonl", with_row([CHAT] * 6, 2, {**CHAT, "chosen": []}))
    _run("dpo", f"--model {chat_model} --dataset {rows} --eval-pairs 1 --num-eval-prompts 0", tmp_path,
         "line 3: 'chosen' has no completion")  # an empty assistant message: below, through the same loader


def test_a_completion_that_does_not_end_with_the_assistant_is_one_line(chat_model, tmp_path):
    bad = {**CHAT, "chosen": [assistant("Yes."), user("Really?")]}
    rows = write_jsonl(tmp_path / "roles.jsonl", with_row([CHAT] * 6, 1, bad))
    _run("dpo", f"--model {chat_model} --dataset {rows} --eval-pairs 1 --num-eval-prompts 0", tmp_path,
         "line 2: 'chosen' message 2 is the user's turn")


@pytest.mark.parametrize("row, needle", [
    ({**CHAT, "prompt": [user("Hi"), assistant("Hm")]}, "line 3: the prompt ends with the assistant's turn ('prompt' "
                                                        "message 2)"),
    ({**CHAT, "prompt": [{"role": "human", "content": "Hi"}]}, "line 3: 'prompt' message 1 has the role 'human'"),
    ({**CHAT, "rejected": [assistant("No."), {"role": "bot", "content": "x"}]}, "'rejected' message 2 has the role "
                                                                              "'bot'"),
    ({**CHAT, "rejected": [{"role": "tool", "content": "42"}]}, "'rejected' ends with the tool's turn"),
    ({**CHAT, "chosen": [assistant(" \n")]}, "'chosen' message 1 (the assistant's) is empty"),
    ({"chosen": [user("Hi"), assistant("Hello")], "rejected": [user("Hey"), assistant("Go")]},
     "line 3: 'chosen' message 1 is the user's turn, inside the completion"),          # two prompts, no shared one
    ({"chosen": [user("Hi"), assistant("")], "rejected": [user("Hi"), assistant("Go")]},
     "line 3: 'chosen' message 2 (the assistant's) is empty"),                          # implicit: the row's index
    ({"chosen": [], "rejected": []}, "line 3: 'chosen' has no completion"),
])
def test_every_malformed_conversation_is_one_line_naming_row_field_and_message(row, needle, tmp_path):
    rows = write_jsonl(tmp_path / "p.jsonl", with_row([CHAT] * 4, 2, row))
    with pytest.raises(UsageError) as error:
        preference_pairs.load_pairs(rows)
    assert needle in str(error.value) and rows in str(error.value) and "\n" not in str(error.value), error.value


def test_well_formed_conversations_pass_with_tool_turns_and_a_system_prompt(tmp_path):
    tool_call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                                                                      "function": {"name": "f", "arguments": {}}}]}
    row = {"prompt": [{"role": "system", "content": "Be kind."}, user("Hi")],
           "chosen": [tool_call, {"role": "tool", "content": "42"}, assistant("It is 42.")],
           "rejected": [assistant("No.")]}
    implicit = {"chosen": [user("Hi"), assistant("Hello")], "rejected": [user("Hi"), assistant("Go")]}
    pairs = preference_pairs.load_pairs(write_jsonl(tmp_path / "p.jsonl", [row, implicit]))
    assert pairs[0] == row and pairs[1]["prompt"] == [user("Hi")]


# --- 3, 4: conversations where the model or the true reward takes only text ---------------------------------------

def test_conversations_on_a_model_without_a_chat_template_are_one_line(tmp_path):
    rows = write_jsonl(tmp_path / "chat.jsonl", [CHAT] * 6)
    _run("reward-model", f"--model tiny --dataset {rows} --eval-pairs 1", tmp_path,
         "--model tiny has no chat template; the conversational pairs of --dataset")


def test_conversations_with_the_tiny_true_reward_are_one_line(chat_model, tmp_path):
    rows = write_jsonl(tmp_path / "chat.jsonl", [CHAT] * 6)
    _run("dpo", f"--preset tiny --model {chat_model} --dataset {rows} --eval-pairs 1", tmp_path,
         "--true-reward tiny-preferences scores plain-text completions", "pass --true-reward none")


# --- 6: --export-trl to a place that cannot take the script --------------------------------------------------------

@pytest.fixture
def read_only(tmp_path):
    """A read-only folder: a read-only tmpfs as root (who writes through file modes), else a folder of mode 555."""
    place = tmp_path / "ro"
    place.mkdir()
    if os.geteuid() != 0:
        place.chmod(0o555)
        yield place
        place.chmod(0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(place)],
                      capture_output=True).returncode:
        pytest.skip("mount is not permitted here")
    yield place
    subprocess.run(["umount", str(place)], check=True)


def test_export_trl_into_a_directory_or_a_read_only_place_is_one_line_and_writes_nothing(read_only, tmp_path):
    (tmp_path / "scripts").mkdir()
    result = _cli("reward-model --preset tiny --export-trl scripts --out run", tmp_path)
    _refused(result, "--export-trl scripts is a directory; give a file name for the script")
    assert list((tmp_path / "scripts").iterdir()) == []
    result = _cli("dpo --preset tiny --export-trl ro/dpo_trl.py --out run", tmp_path)
    _refused(result, "--export-trl ro/dpo_trl.py: cannot write there (")
    assert list(read_only.iterdir()) == [] and not (tmp_path / "run").exists()


def test_export_trl_makes_a_missing_parent_folder_as_grpo_does(tmp_path):
    result = _cli("dpo --preset tiny --export-trl new/deeper/dpo_trl.py --out run", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "DPOTrainer" in (tmp_path / "new" / "deeper" / "dpo_trl.py").read_text()
    assert not (tmp_path / "run").exists()


# --- 7: --eval-pairs 0 with sampled prompts ------------------------------------------------------------------------

def test_dpo_without_held_out_pairs_samples_on_training_prompts(tmp_path):
    rows = write_jsonl(tmp_path / "pairs.jsonl", PLAIN)
    result = _cli(f"dpo --model tiny --dataset {rows} --eval-pairs 0 --num-eval-prompts 4 --max-new-tokens 4 "
                  f"--steps 1 --batch-size 2 --eval-every 1 --threads 1 --no-progress --out run", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (record,) = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert "sample_kl" in record and 0 < record["response_length"] <= 4
    assert "eval_accuracy" not in record  # no held-out pairs to rank


# --- 8: a local dataset directory ----------------------------------------------------------------------------------

def test_a_folder_of_files_without_a_test_split_is_one_line_saying_what_to_do(tmp_path):
    (tmp_path / "pairs").mkdir()
    write_jsonl(tmp_path / "pairs" / "train.jsonl", PLAIN)
    _run("reward-model", "--model tiny --dataset pairs --eval-pairs 2", tmp_path,
         "--dataset 'pairs': cannot load split 'test' (it has 'train' only)", "its last --eval-pairs rows are held "
         "out", "test.jsonl beside the other files", "--eval-pairs 0")


def test_saved_datasets_a_dict_without_test_is_one_line_and_one_dataset_holds_out_its_last_rows(tmp_path):
    from datasets import Dataset, DatasetDict

    DatasetDict({"train": Dataset.from_list(PLAIN)}).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(UsageError, match=r"cannot load split 'test' \(it has 'train' only\); pass a local \.jsonl "
                                         r"file.*to the DatasetDict saved there"):
        preference_pairs.train_and_held_out(str(tmp_path / "dict"), 2)
    train, held_out = preference_pairs.train_and_held_out(str(tmp_path / "dict"), 0)
    assert train == PLAIN and held_out == []
    Dataset.from_list(PLAIN).save_to_disk(str(tmp_path / "one"))  # no splits: read as a file is
    train, held_out = preference_pairs.train_and_held_out(str(tmp_path / "one"), 2)
    assert train == PLAIN[:-2] and held_out == PLAIN[-2:]


# --- 9: a model that is not a reward model as ppo-sentiment's --reward-model ---------------------------------------

def test_a_causal_lm_is_refused_as_a_reward_model_before_its_weights_load(capfd):
    path = str(review_models.tiny_model_path())
    with pytest.raises(UsageError, match=r"^--reward-model DIR is a GPT2LMHeadModel, not a sequence classifier"):
        load_classifier(path, "DIR")
    assert capfd.readouterr().err == ""  # no load report from transformers


def test_ppo_sentiment_with_a_causal_lm_as_reward_model_is_one_line(tmp_path):
    result = _cli(f"ppo-sentiment --preset tiny --reward-model {review_models.tiny_model_path()} --steps 1 --out run",
                  tmp_path)
    _refused(result, "is a GPT2LMHeadModel, not a sequence classifier")
    assert not (tmp_path / "run").exists()
