"""The sentiment task's prompts: 2–8-token prefixes of movie reviews (``stanfordnlp/imdb`` through ``datasets``,
or a local .jsonl/.json/.csv/.txt file), or the bundled review openings (offline). The classic RLHF exercise:
continue the opening of a movie review so that it reads positive."""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Sequence
from pathlib import Path

from ladder.runtime.errors import UsageError
from ladder.tasks.generated_reviews import BUNDLED_PROMPTS
from ladder.tasks.hub_loading import hub_or_local

DEFAULT_DATASET = "stanfordnlp/imdb"

_TEXT_FIELDS = ("review", "text", "prompt", "sentence", "content")


def _pick_text(row, where: str) -> str:
    if isinstance(row, str):
        return row
    if isinstance(row, dict):
        for key in _TEXT_FIELDS:
            if isinstance(row.get(key), str):
                return row[key]
    raise UsageError(f"--dataset {where}: every row needs a text field (one of {', '.join(_TEXT_FIELDS)})")


def read_texts(path: Path) -> list[str]:
    """Review texts from a local .jsonl / .json / .csv / .txt (one review per line) file."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        elif suffix == ".json":
            data = json.loads(path.read_text())
            rows = data if isinstance(data, list) else data.get("train", data.get("rows", data.get("text", [])))
        elif suffix == ".csv":
            with path.open(newline="") as f:
                rows = list(csv.DictReader(f))
        elif suffix == ".txt":
            rows = [line for line in path.read_text().splitlines() if line.strip()]
        else:
            raise UsageError(f"--dataset {path}: use a .jsonl, .json, .csv or .txt file")
    except (ValueError, UnicodeDecodeError, csv.Error) as e:
        raise UsageError(f"--dataset {path}: cannot parse the file ({type(e).__name__})") from None
    if not isinstance(rows, list):
        raise UsageError(f"--dataset {path}: expected a list of rows")
    return [_pick_text(row, str(path)) for row in rows]


def load_review_texts(dataset: str, split: str = "train") -> list[str]:
    """Review texts from a local file or, through ``datasets.load_dataset``, from the hub."""
    path = Path(dataset)
    if path.is_file():
        texts = read_texts(path)
    elif path.is_dir():
        raise UsageError(f"--dataset {path}: pass a .jsonl, .json, .csv or .txt file, not a directory")
    else:
        def load(where):
            import datasets

            return datasets.load_dataset(where, split=split)

        rows = hub_or_local(dataset, "dataset", "--dataset", load, kind="dataset")
        column = next((c for c in _TEXT_FIELDS if c in rows.column_names), None)
        if column is None:
            raise UsageError(f"--dataset {dataset}: no text column among {rows.column_names}")
        texts = list(rows[column])
    texts = [t for t in (str(t).replace("<br />", " ").strip() for t in texts) if t]
    if not texts:
        raise UsageError(f"--dataset {dataset}: no texts")
    return texts


def truncate_prompts(texts: Sequence[str], tokenizer, min_tokens: int = 2, max_tokens: int = 8, seed: int = 0,
                     max_chars: int = 256) -> list[str]:
    """Each text cut to its first k tokens, k ~ U{min_tokens..max_tokens} (TRL's LengthSampler),
    decoded back to text. Texts shorter than ``min_tokens`` are dropped."""
    rng = random.Random(seed)
    encoded = tokenizer([t[:max_chars] for t in texts], add_special_tokens=False)["input_ids"]
    prompts = []
    for ids in encoded:
        k = rng.randint(min_tokens, max_tokens)
        if len(ids) >= min_tokens:
            prompts.append(tokenizer.decode(ids[:k]).strip())
    return [p for p in prompts if p]


def load_prompts(dataset: str, tokenizer, min_tokens: int = 2, max_tokens: int = 8, limit: int | None = None,
                 seed: int = 0) -> list[str]:
    """Prompt texts: ``"bundled"`` → the bundled review openings; otherwise 2–8-token prefixes of the
    reviews in ``dataset`` (a hub id or a local file), at most ``limit`` of them, drawn at random
    (IMDB's train split is sorted by label: its first reviews are all negative)."""
    if dataset == "bundled":
        return list(BUNDLED_PROMPTS)
    texts = load_review_texts(dataset)
    if limit and limit < len(texts):
        texts = random.Random(seed).sample(texts, limit)
    prompts = truncate_prompts(texts, tokenizer, min_tokens, max_tokens, seed)
    if not prompts:
        raise UsageError(f"--dataset {dataset}: no review has {min_tokens} tokens")
    return prompts
