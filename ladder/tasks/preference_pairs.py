"""Preference pairs (prompt x, chosen y_w, rejected y_l) in TRL's preference format, from a local file or the hub.

    explicit prompt    {"prompt": x, "chosen": y_w, "rejected": y_l}
    implicit prompt    {"chosen": x + y_w, "rejected": x + y_l}: the longest prefix both share is the prompt
                       (TRL's ``extract_prompt``: whole messages, or characters, a space before the split kept
                       with the completions)
    plain              each field a string
    conversational     each field a list of {"role", "content"} messages: the prompt's ending with the user's turn
                       (or a tool's result), each completion the assistant's turns (and tool results), ending with
                       the assistant's, not empty; roles are system, user, assistant and tool

A local .jsonl file (one object per line) or .json file (a list) is read as it is, as is a directory holding one
dataset saved with ``datasets``' ``save_to_disk``; "tiny" is the tiny preference task the package ships
(``tiny_preferences``); a directory of splits (a ``DatasetDict`` saved to disk, or a folder of files such as
train.jsonl and test.jsonl) and any other name — a hub dataset — are loaded split by split (``datasets``' own
loaders) — ``DEFAULT_DATASET``, TRL's own preference set, is the users' default. A row that is not a pair is one line
naming the file, the row and the field; so is a split the dataset lacks. ``train_and_held_out`` gives a run its two
sets: the "train" and "test" splits, or a single file's last rows held out, with ``check`` (a rung's tokenizer
checks: ``policies.dpo_batch.check_pairs``) seeing every kept pair and its row first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ladder.runtime.errors import UsageError
from ladder.tasks.dataset_rows import hub_rows, json_kind, rows_from_file

DEFAULT_DATASET = "trl-lib/ultrafeedback_binarized"  # the set TRL's RewardTrainer and DPOTrainer examples train on
NEED = ("every row needs 'chosen' and 'rejected' (and, if the prompt is not their shared beginning, 'prompt'): "
        "all strings, or all lists of {role, content} messages")
ROLES = ("system", "user", "assistant", "tool")  # the roles chat templates know
INSTEAD = "pass a local .jsonl file of prompt/chosen/rejected rows"

Located = list[tuple[str, dict]]  # (where: "line 4", "row 4", "pair 4"; the pair)
Check = Callable[[Located, Located], None]  # (training pairs, held-out pairs), each pair with its row


def load_pairs(dataset: str = DEFAULT_DATASET, split: str = "train", limit: int | None = None) -> list[dict]:
    """The pairs as {"prompt", "chosen", "rejected"}, each a string or a list of messages (the prompt explicit)."""
    return [p for _, p in located_pairs(dataset, split, limit)]


def located_pairs(dataset: str = DEFAULT_DATASET, split: str = "train", limit: int | None = None) -> Located:
    """``load_pairs``' pairs, each with its row ("line 4" of a .jsonl file, "row 4" of a list or a split)."""
    path = Path(dataset)
    if dataset == "tiny":
        from ladder.tasks import tiny_preferences

        rows = [(f"pair {i + 1}", row) for i, row in enumerate(tiny_preferences.pairs(split))]
    elif path.is_file():
        rows = rows_from_file(path)
    elif path.is_dir():
        rows = _directory_rows(dataset, split)
    else:
        rows = hub_rows(dataset, split, INSTEAD)
    if not rows:
        raise UsageError(f"--dataset {dataset}: no rows")
    pairs = [(where, pair(dataset, where, row)) for where, row in rows]
    return pairs[:limit] if limit else pairs


def single(dataset: str) -> bool:
    """A dataset without splits — a local file, a directory holding one saved ``Dataset`` — whose last rows a run
    holds out."""
    path = Path(dataset)
    return path.is_file() or (path.is_dir() and _saved_splits(path) is None and (path / "state.json").is_file())


def train_and_held_out(dataset: str, held_out: int, limit: int | None = None,
                       check: Check | None = None) -> tuple[list[dict], list[dict]]:
    """(pairs to train on, ``held_out`` pairs to evaluate on): a hub dataset's, a directory's or the tiny task's
    "train" and "test" splits; a single file's first rows and its last ``held_out`` rows. ``check``, if given, sees
    both, each pair with its row, before they are returned."""
    if single(dataset):
        pairs = located_pairs(dataset)
        if len(pairs) <= held_out:
            raise UsageError(f"--dataset {dataset}: {len(pairs)} pairs leave none to train on after the "
                             f"{held_out} held out (--eval-pairs); lower --eval-pairs below {len(pairs)}")
        train = pairs[:-held_out] if held_out else pairs
        train, test = (train[:limit] if limit else train), (pairs[-held_out:] if held_out else [])
    else:
        test = located_pairs(dataset, split="test", limit=held_out) if held_out else []
        train = located_pairs(dataset, split="train", limit=limit)
    if check is not None:
        check(train, test)
    return [p for _, p in train], [p for _, p in test]


def conversational(pairs: list[dict]) -> bool:
    """Whether any of the pairs is a conversation (lists of messages), not plain strings."""
    return any(isinstance(p["chosen"], list) for p in pairs)


# --- a local directory: one saved dataset, or splits -------------------------------------------------------------

@contextmanager
def _quiet_datasets() -> Iterator[None]:
    """No "Generating train split" bars from ``datasets`` (they would precede a one-line error)."""
    from datasets.utils import logging as ds_logging

    was_enabled = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            ds_logging.enable_progress_bar()


def _saved_splits(path: Path) -> list[str] | None:
    """The splits of a ``DatasetDict`` saved with ``save_to_disk`` (its dataset_dict.json); None if it is not one."""
    try:
        splits = json.loads((path / "dataset_dict.json").read_text()).get("splits")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(s) for s in splits] if isinstance(splits, list) else None


def _file_splits(path: Path) -> list[str]:
    """The splits ``datasets.load_dataset`` finds in a folder of files (train.jsonl, test.jsonl, data/train-*, …)."""
    from datasets.data_files import get_data_patterns

    try:
        return [str(split) for split in get_data_patterns(str(path))]
    except Exception:  # noqa: BLE001 - no data files it can read: the split is missing, said below
        return []


def _directory_rows(dataset: str, split: str) -> list[tuple[str, object]]:
    """(where, row) pairs of a local directory's ``split`` (all its rows if it holds one saved ``Dataset``); a split
    it lacks is one line that names it and says what to do."""
    from datasets import load_from_disk

    path = Path(dataset)
    saved = _saved_splits(path)
    with _quiet_datasets():
        if saved is None and (path / "state.json").is_file():  # Dataset.save_to_disk: one set, no splits
            source = _from_disk(dataset, lambda: load_from_disk(str(path)))
            return [(f"row {n}", row) for n, row in enumerate(source, 1)]
        splits = saved if saved is not None else _file_splits(path)
        if split not in splits:
            how = "to the DatasetDict saved there" if saved is not None else f"{split}.jsonl beside the other files"
            raise UsageError(_missing_split(dataset, split, splits, how))
        if saved is not None:
            source = _from_disk(dataset, lambda: load_from_disk(str(path))[split])
            return [(f"row {n}", row) for n, row in enumerate(source, 1)]
        return hub_rows(dataset, split, INSTEAD)


def _from_disk(dataset: str, load: Callable):
    try:
        return load()
    except Exception as e:  # noqa: BLE001 - a damaged or partial save: one line
        raise UsageError(f"--dataset {dataset}: cannot load the dataset saved there ({type(e).__name__}); save it "
                         f"again, or {INSTEAD}") from None


def _missing_split(dataset: str, split: str, splits: list[str], how: str) -> str:
    """The one line for a local directory without ``split``: its splits, and what to do (``how``: how a split is
    added to it)."""
    has = f"it has {', '.join(repr(s) for s in splits)} only" if splits else "it holds no data files datasets reads"
    what = (f"{INSTEAD} (its last --eval-pairs rows are held out), add a 'test' split ({how}), or pass "
            f"--eval-pairs 0" if split == "test" else f"{INSTEAD}, or add a {split!r} split ({how})")
    return f"--dataset {dataset!r}: cannot load split {split!r} ({has}); {what}"


# --- one row -------------------------------------------------------------------------------------------------------

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
    if kinds["chosen"] == "messages" and (problem := conversation_problem(kept, implicit="prompt" not in row)):
        raise UsageError(f"--dataset {dataset}: {where}: {problem}")
    scores = {k: row[k] for k in ("score_chosen", "score_rejected") if isinstance(row.get(k), (int, float))}
    return {**kept, **scores}


def conversation_problem(explicit: dict, implicit: bool = False) -> str | None:
    """What is wrong with a conversational pair (its prompt explicit), in words that name the row's field and
    message (an implicit prompt's messages are the first of 'chosen' and 'rejected'); None if nothing."""
    prompt = explicit["prompt"]

    def name(field: str, i: int) -> str:  # the i-th message (0-based) of ``field`` of the pair, as the row holds it
        if field == "prompt":
            return f"'chosen' and 'rejected' message {i + 1} (the prompt)" if implicit else f"'prompt' message {i + 1}"
        return f"'{field}' message {i + 1 + (len(prompt) if implicit else 0)}"

    for field in ("prompt", "chosen", "rejected"):
        for i, message in enumerate(explicit[field]):
            if message["role"] not in ROLES:
                return f"{name(field, i)} has the role {message['role']!r}; the roles are {', '.join(ROLES)}"
    if prompt and prompt[-1]["role"] not in ("user", "tool"):
        return (f"the prompt ends with the {prompt[-1]['role']}'s turn ({name('prompt', len(prompt) - 1)}); a "
                f"prompt ends with the user's turn, which the completions answer")
    for field in ("chosen", "rejected"):
        completion = explicit[field]
        if not completion:
            where = "after its shared beginning with the other" if implicit else "(an empty list)"
            return f"'{field}' has no completion {where}; each needs the assistant's reply"
        for i, message in enumerate(completion):
            if message["role"] not in ("assistant", "tool"):
                return (f"{name(field, i)} is the {message['role']}'s turn, inside the completion; a completion holds "
                        f"the assistant's turns (and tool results) only"
                        + ("; do 'chosen' and 'rejected' share their prompt?" if implicit else ""))
            if message["role"] == "assistant" and not message["content"].strip() and not message.get("tool_calls"):
                return f"{name(field, i)} (the assistant's) is empty"
        if completion[-1]["role"] != "assistant":
            return (f"'{field}' ends with the {completion[-1]['role']}'s turn ({name(field, len(completion) - 1)}); "
                    f"a completion ends with the assistant's")
    return None


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
