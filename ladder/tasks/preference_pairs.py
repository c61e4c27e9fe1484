"""Preference pairs (prompt x, chosen y_w, rejected y_l) in TRL's preference format, from a local file or the hub.

    explicit prompt    {"prompt": x, "chosen": y_w, "rejected": y_l}
    implicit prompt    {"chosen": x + y_w, "rejected": x + y_l}: the longest prefix both share is the prompt
                       (TRL's ``extract_prompt``: whole messages, or characters, a space before the split kept
                       with the completions)
    plain              each field a string
    conversational     each field a list of {"role", "content"} messages (the prompt's ending with the user's turn)

A local .jsonl file (one object per line) or .json file (a list) is read as it is; "tiny" is the tiny preference
task the package ships (``tiny_preferences``); any other name is a hub dataset loaded with
``datasets.load_dataset(name, split=split)`` — ``DEFAULT_DATASET``, TRL's own preference set, is the users'
default. A row that is not a pair is one line naming the file, the row and the field. ``train_and_held_out`` gives
a run its two sets: the "train" and "test" splits, or a local file's last rows held out.
"""

from __future__ import annotations

from pathlib import Path

from ladder.runtime.errors import UsageError
from ladder.tasks.dataset_rows import hub_rows, json_kind, rows_from_file

DEFAULT_DATASET = "trl-lib/ultrafeedback_binarized"  # the set TRL's RewardTrainer and DPOTrainer examples train on
NEED = ("every row needs 'chosen' and 'rejected' (and, if the prompt is not their shared beginning, 'prompt'): "
        "all strings, or all lists of {role, content} messages")


def load_pairs(dataset: str = DEFAULT_DATASET, split: str = "train", limit: int | None = None) -> list[dict]:
    """The pairs as {"prompt", "chosen", "rejected"}, each a string or a list of messages (the prompt explicit)."""
    path = Path(dataset)
    if dataset == "tiny":
        from ladder.tasks import tiny_preferences

        rows = [(f"pair {i + 1}", row) for i, row in enumerate(tiny_preferences.pairs(split))]
    elif path.is_file():
        rows = rows_from_file(path)
    else:
        rows = hub_rows(dataset, split, "pass a local .jsonl file of prompt/chosen/rejected rows")
    if not rows:
        raise UsageError(f"--dataset {dataset}: no rows")
    pairs = [pair(dataset, where, row) for where, row in rows]
    return pairs[:limit] if limit else pairs


def train_and_held_out(dataset: str, held_out: int, limit: int | None = None) -> tuple[list[dict], list[dict]]:
    """(pairs to train on, ``held_out`` pairs to evaluate on): a hub dataset's or the tiny task's "train" and "test"
    splits; a local file's first rows and its last ``held_out`` rows."""
    if Path(dataset).is_file():
        pairs = load_pairs(dataset)
        if len(pairs) <= held_out:
            raise UsageError(f"--dataset {dataset}: {len(pairs)} pairs leave none to train on after the "
                             f"{held_out} held out (--eval-pairs)")
        train = pairs[:-held_out] if held_out else pairs
        return (train[:limit] if limit else train), (pairs[-held_out:] if held_out else [])
    test = load_pairs(dataset, split="test", limit=held_out) if held_out else []
    return load_pairs(dataset, split="train", limit=limit), test


def pair(dataset: str, where: str, row) -> dict:
    """A row as an explicit-prompt pair; one line naming the row and the field if it is not one."""
    if not isinstance(row, dict):
        raise UsageError(f"--dataset {dataset}: {where} is {json_kind(row)}, not an object; {NEED}")
    fields = ("prompt", "chosen", "rejected") if "prompt" in row else ("chosen", "rejected")
    for field in ("chosen", "rejected"):
        if field not in row:
            raise UsageError(f"--dataset {dataset}: {where}: no '{field}' field; {NEED}")
    kinds = {field: _kind(row[field]) for field in fields}
    for field, kind in kinds.items():
        if kind is None:
            raise UsageError(f"--dataset {dataset}: {where}: '{field}' is {json_kind(row[field])}; {NEED}")
    if len(set(kinds.values())) > 1:
        raise UsageError(f"--dataset {dataset}: {where}: mixes strings and message lists ("
                         + ", ".join(f"'{f}' {k}" for f, k in kinds.items()) + f"); {NEED}")
    explicit = row if "prompt" in row else extract_prompt(row["chosen"], row["rejected"])
    kept = {"prompt": explicit["prompt"], "chosen": explicit["chosen"], "rejected": explicit["rejected"]}
    scores = {k: row[k] for k in ("score_chosen", "score_rejected") if isinstance(row.get(k), (int, float))}
    return {**kept, **scores}


def _kind(value) -> str | None:
    """"text" for a string, "messages" for a list of {role, content} objects, None for anything else."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                       and isinstance(m.get("content"), str) for m in value):
        return "messages"
    return None


def extract_prompt(chosen, rejected) -> dict:
    """{"prompt": the longest prefix ``chosen`` and ``rejected`` share, "chosen"/"rejected": the rest} — by
    messages, or by characters with a space at the split left to the completions; where one holds all of the
    other, its last element stays with the completions (TRL's ``extract_prompt``)."""
    n = min(len(chosen), len(rejected))
    differ = [i for i in range(n) if chosen[i] != rejected[i]]
    if differ:
        shared = differ[0] - (differ[0] > 0 and chosen[differ[0] - 1] == " ")
    else:
        shared = max(n - 1, 0)
    return {"prompt": chosen[:shared], "chosen": chosen[shared:], "rejected": rejected[shared:]}
