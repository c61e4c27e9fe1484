"""A dataset's rows, each with where it was found — for one-line errors that name the file, the row and the field
(``math_problems``' GSM8K rows, ``preference_pairs``' pairs):

    rows_from_file(path)                 a local .jsonl file's objects by line, or a .json file's list (or the list
                                         under its 'train' or 'rows' key), as users write them
    hub_rows(dataset, split, instead)    a hub dataset's split through ``datasets.load_dataset``; what it cannot
                                         load is one line that says what to pass ``instead``
"""

from __future__ import annotations

import json
from pathlib import Path

from ladder.runtime.errors import UsageError


def read_text(path: Path) -> str:
    """The file as text; a UTF-8 byte-order mark (as some Windows editors save) is not part of the JSON."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise UsageError(f"--dataset {path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except OSError as e:
        raise UsageError(f"--dataset {path}: cannot read it ({e.strerror or type(e).__name__})") from None


def rows_from_file(path: Path) -> list[tuple[str, object]]:
    """(where, row) pairs: a JSONL file's rows by line number, a JSON file's by their place in its list."""
    text = read_text(path)
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                rows.append((f"line {n}", parse_json(path, line, f" at line {n}")))
        return rows
    data = parse_json(path, text)
    if isinstance(data, dict):
        data = data.get("train", data.get("rows", []))
    if not isinstance(data, list):
        raise UsageError(f"--dataset {path}: holds {json_kind(data)}, not a list of rows (nor an object with a "
                         f"'train' or 'rows' list)")
    return [(f"row {n}", row) for n, row in enumerate(data, 1)]


def parse_json(path: Path, text: str, where: str = ""):
    try:
        return json.loads(text)
    except ValueError as e:
        raise UsageError(f"--dataset {path}: not valid JSON/JSONL ({e.__class__.__name__}{where})") from None


def json_kind(value) -> str:
    names = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def hub_rows(dataset: str, split: str, instead: str, name: str | None = None) -> list[tuple[str, object]]:
    """(where, row) pairs of the hub dataset's ``split`` (its configuration ``name``, if it has several)."""
    from ladder.hub import resolve

    source = resolve(dataset, "--dataset", kind="dataset")
    try:
        from datasets import load_dataset

        return [(f"row {n}", row) for n, row in enumerate(load_dataset(source, name, split=split), 1)]
    except Exception as e:  # noqa: BLE001 - unknown id, no such split, bad files: one message
        raise UsageError(f"--dataset {dataset!r}: cannot load split {split!r} ({e.__class__.__name__}); "
                         f"{instead}") from None
