"""Preference pairs in TRL's format, from local files (the hub's path, offline, is one line): explicit or implicit
prompts, plain or conversational, the implicit prompt split as TRL splits it, and every malformed row one line that
names the file, the row and the field."""

from __future__ import annotations

import json

import pytest
from trl.data_utils import extract_prompt as trl_extract_prompt

from ladder import hub
from ladder.runtime.errors import UsageError
from ladder.tasks import preference_pairs

USER = [{"role": "user", "content": "Is the film good?"}]
YES, NO = [{"role": "assistant", "content": "Yes, a delight."}], [{"role": "assistant", "content": "No."}]


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_explicit_pairs_plain_and_conversational(tmp_path):
    rows = [{"prompt": "The film was", "chosen": " great.", "rejected": " dull."},
            {"prompt": USER, "chosen": YES, "rejected": NO}]
    pairs = preference_pairs.load_pairs(write_jsonl(tmp_path / "p.jsonl", rows))
    assert pairs == rows
    (tmp_path / "p.json").write_text(json.dumps(rows))
    assert preference_pairs.load_pairs(str(tmp_path / "p.json"), limit=1) == rows[:1]


def test_a_dataset_directory_goes_through_datasets_load_dataset_as_a_hub_id_does(tmp_path):
    """The users' default path (``datasets.load_dataset(name, split=…)``), on a local dataset directory."""
    rows = [{"prompt": "The film was", "chosen": " great.", "rejected": " dull."},
            {"prompt": USER, "chosen": YES, "rejected": NO}]
    (tmp_path / "pairs").mkdir()
    write_jsonl(tmp_path / "pairs" / "train.jsonl", rows[:1])
    assert preference_pairs.load_pairs(str(tmp_path / "pairs")) == rows[:1]
    with pytest.raises(UsageError, match=r"cannot load split 'test' \(.*\); pass a local \.jsonl file"):
        preference_pairs.load_pairs(str(tmp_path / "pairs"), split="test")


@pytest.mark.parametrize("chosen, rejected", [
    ("The film was great.", "The film was dull."),        # a space before the split stays with the completions
    ("Q: 2+2? A: 4", "Q: 2+2? A: 5"),
    ("ab", "abc"),                                        # one holds the other: its last element stays
    (USER + YES, USER + NO),
    (USER + YES, USER + YES + NO),
])
def test_an_implicit_prompt_is_split_as_trl_splits_it(chosen, rejected, tmp_path):
    (pair,) = preference_pairs.load_pairs(write_jsonl(tmp_path / "p.jsonl", [{"chosen": chosen, "rejected": rejected}]))
    assert pair == trl_extract_prompt({"chosen": chosen, "rejected": rejected})
    assert pair["prompt"] + pair["chosen"] == chosen and pair["prompt"] + pair["rejected"] == rejected


@pytest.mark.parametrize("line, needle", [
    ('["a", "b"]', "line 1 is a list, not an object"),
    ('{"chosen": "a"}', "line 1: no 'rejected' field"),
    ('{"chosen": 3, "rejected": "b"}', "line 1: 'chosen' is a number"),
    ('{"prompt": "x", "chosen": [{"role": "assistant", "content": "a"}], "rejected": "b"}', "mixes strings and"),
    ('{"chosen": [{"role": "assistant"}], "rejected": [{"role": "assistant", "content": "b"}]}', "'chosen' is a list"),
    ('{"chosen": "a", "rejected": ', "not valid JSON/JSONL (JSONDecodeError at line 1)"),
])
def test_a_malformed_row_is_one_line_naming_it(line, needle, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(UsageError) as error:
        preference_pairs.load_pairs(str(path))
    message = str(error.value)
    assert needle in message and str(path) in message and "\n" not in message, message


def test_an_empty_file_and_an_unreachable_hub_dataset_are_one_line(tmp_path, monkeypatch):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(UsageError, match="no rows"):
        preference_pairs.load_pairs(str(tmp_path / "empty.jsonl"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing cached
    hub.hub_reachable.cache_clear()  # decided again, offline
    with pytest.raises(UsageError, match=r"^--dataset 'trl-lib/ultrafeedback_binarized' is not a local path"):
        preference_pairs.load_pairs(preference_pairs.DEFAULT_DATASET)
