"""The math tasks' data: which problems train and which are held out — one rule for every command.

    arithmetic   ladder's 8,100 synthetic sums of two 2-digit numbers (offline; ladder.tasks.arithmetic)
    gsm8k        GSM8K word problems: a hub id (train and test splits) or a local .json/.jsonl (one split)

``split`` is the rule: the grpo rung trains on its first list and evaluates on its second, the ``eval``
command (``python -m ladder.run eval``) scores the same second list, and the script ``--export-trl`` writes
trains on the same first list. ``resolve_math_model`` turns the ``@tiny-math`` alias into the cached tiny model.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from ladder.runtime.errors import UsageError
from ladder.tasks import arithmetic
from ladder.tasks.dataset_rows import hub_rows, json_kind, rows_from_file

TASKS = ("gsm8k", "arithmetic")
TINY_MODEL = "@tiny-math"
TINY_TEACHER = "@tiny-math-teacher"  # the tiny model's tutor who always carries (the distill rung's teacher)
SYSTEM_PROMPTS = {"gsm8k": arithmetic.SYSTEM_PROMPT, "arithmetic": arithmetic.TINY_SYSTEM_PROMPT}
ARITHMETIC_PROBLEMS = 90 * 90  # every sum of two 2-digit numbers
HELD_OUT_FRACTION = 5  # a one-split dataset holds out at most 1/5 of its rows


def resolve_math_model(model: str, flag: str = "--model") -> str:
    """``@tiny-math`` → the directory of ladder's tiny instruct model (the copy the package ships),
    ``@tiny-math-teacher`` → its tutor's, who always carries; any other name (hub id, local directory) as given,
    but an ``@name`` ladder does not ship (and no such directory) is ``flag``'s one line."""
    if model.startswith("@") and model not in (TINY_MODEL, TINY_TEACHER) and not Path(model).exists():
        raise UsageError(f"{flag} {model}: ladder ships no model by that name (for the math problems: {TINY_MODEL}, "
                         f"{TINY_TEACHER}); give a hub id or a local directory")
    if model == TINY_TEACHER:
        return str(arithmetic.tiny_math_teacher())
    return str(arithmetic.tiny_math_model()) if model == TINY_MODEL else model


def system_prompt(task: str, given: str | None = None) -> str:
    """``given`` (``--system-prompt``), or the task's own when none (or an empty one) is given."""
    return given or SYSTEM_PROMPTS[task]


# --- GSM8K ------------------------------------------------------------------------------------

def _problem(dataset: str, where: str, row) -> dict:
    """A row as a problem {question, answer: the number after '####'}; a row without a 'question' string or
    an 'answer' string (or number) is one line naming the file, the row and the field."""
    need = "every row needs a 'question' string and an 'answer' (a string ending in '#### N', or a number)"
    if not isinstance(row, dict):
        raise UsageError(f"--dataset {dataset}: {where} is {json_kind(row)}, not an object; {need}")
    for field, kinds in (("question", (str,)), ("answer", (str, int, float))):
        if field not in row:
            raise UsageError(f"--dataset {dataset}: {where}: no '{field}' field; {need}")
        if not isinstance(row[field], kinds) or isinstance(row[field], bool):
            raise UsageError(f"--dataset {dataset}: {where}: '{field}' is {json_kind(row[field])}; {need}")
    return {"question": row["question"], "answer": arithmetic.gold_answer(str(row["answer"]))}


def load_gsm8k(dataset: str = "openai/gsm8k", split: str = "train", limit: int | None = None) -> list[dict]:
    """GSM8K as problems: from the hub through ``datasets`` or from a local .json/.jsonl file
    whose rows have 'question' and 'answer' (the answer ending in '#### N'). A file has one split:
    ``split`` is ignored for it (``split()`` below holds out its tail)."""
    path = Path(dataset)
    if path.is_file():
        rows = rows_from_file(path)
    else:
        rows = hub_rows(dataset, split, "pass a local .jsonl file with question/answer rows, or use --preset tiny",
                        name="main")
    if not rows:
        raise UsageError(f"--dataset {dataset}: no rows")
    problems = [_problem(dataset, where, row) for where, row in rows]
    return problems[:limit] if limit else problems


def hold_out_tail(problems: list[dict], eval_size: int, dataset: str) -> tuple[list[dict], list[dict]]:
    """One split: (its head, its last ``min(eval_size, n // 5)`` rows, at least one) — at most a fifth is held
    out, so at least four fifths train whatever ``--eval-size`` says; two rows at least."""
    if len(problems) < 2:
        raise UsageError(f"--dataset {dataset}: {len(problems)} row, nothing left to train on; a dataset with one "
                         f"split holds out its last rows for evaluation (up to --eval-size, at most a fifth) and "
                         f"needs at least 2")
    cut = max(1, min(eval_size, len(problems) // HELD_OUT_FRACTION))
    return problems[:-cut], problems[-cut:]


# --- the rule ---------------------------------------------------------------------------------

def split(task: str, dataset: str | None, eval_size: int, train_size: int = 0,
          prompts_per_step: int = 1) -> tuple[list[dict], list[dict]]:
    """(training problems, held-out evaluation problems) of ``task``, never overlapping.

    - ``arithmetic``: the 8,100 sums shuffled once (seed 0); the first ``eval_size`` are held out, the rest
      train. ``eval_size`` may be at most 8,099 (one sum at least must be left to train on).
    - ``gsm8k`` with a train and a test split (the hub's GSM8K): the train split trains, the first
      ``eval_size`` problems of the test split (all of them if fewer) are held out.
    - ``gsm8k`` with one split (a local .json/.jsonl file, or a hub dataset without a test split): its
      last ``min(eval_size, rows // 5)`` rows, at least one, are held out and the rows before them train —
      at most a fifth is held out, so a 5-row file with ``--eval-size 200`` trains on 4 and evaluates on 1.
      Such a dataset needs at least 2 rows.

    ``dataset`` is ignored for ``arithmetic``. ``train_size`` (0: all) keeps the first ``train_size``
    training problems and may not exceed their number; ``prompts_per_step`` (one update's prompts) may not
    exceed the training problems kept either. A size that does not fit the data is a ``UsageError``
    naming the flag and the largest value that fits.
    """
    if task == "arithmetic":
        if eval_size >= ARITHMETIC_PROBLEMS:
            raise UsageError(f"--eval-size {eval_size} leaves no problem to train on: the arithmetic task has "
                             f"{ARITHMETIC_PROBLEMS:,} sums; hold out at most {ARITHMETIC_PROBLEMS - 1:,}")
        train, held_out = arithmetic.train_eval_split(None, eval_size)
        where = f"of the arithmetic task ({ARITHMETIC_PROBLEMS:,} sums, {len(held_out)} held out)"
    elif task == "gsm8k":
        train, held_out, where = _gsm8k_split(dataset, eval_size)
    else:
        raise UsageError(f"--task {task!r}: choose one of {', '.join(TASKS)}")
    if train_size > len(train):
        raise UsageError(f"--train-size {train_size} is more than the {len(train)} training problems {where}; "
                         f"use at most {len(train)}, or 0 for all")
    if train_size:
        train = train[:train_size]
    if not train:  # every loader above refuses this already; one line, should a new one not
        raise UsageError(f"no training problems {where}")
    if prompts_per_step > len(train):
        raise UsageError(f"--prompts-per-step {prompts_per_step} is more than the {len(train)} training problems "
                         f"{where}; use at most {len(train)}" + (" or a larger --train-size" if train_size else ""))
    return train, held_out


def _gsm8k_split(dataset: str, eval_size: int) -> tuple[list[dict], list[dict], str]:
    if Path(dataset).is_file():
        problems = load_gsm8k(dataset)
        train, held_out = hold_out_tail(problems, eval_size, dataset)
        return train, held_out, f"in --dataset {dataset} ({len(problems)} rows, the last {len(held_out)} held out)"
    train = load_gsm8k(dataset, "train")
    try:
        held_out = load_gsm8k(dataset, "test", limit=eval_size)
    except UsageError:
        held_out = None
    if held_out is None or held_out == train[:len(held_out)]:  # one split after all: hold out its tail
        rows = len(train)
        train, held_out = hold_out_tail(train, eval_size, dataset)
        return train, held_out, f"in --dataset {dataset} ({rows} rows, the last {len(held_out)} held out)"
    return train, held_out, f"in the train split of --dataset {dataset}"


def prompt(tokenizer, problem: dict, system_prompt: str) -> str:
    """A problem's prompt: its question after ``system_prompt``, in the model's chat template, ending where the
    assistant speaks (what the grpo rung samples from and the held-out accuracy is measured on)."""
    return arithmetic.chat_prompt(tokenizer, problem["question"], system_prompt)


# --- a resumed run's data ---------------------------------------------------------------------

def fingerprint(task: str, dataset: str | None) -> str | None:
    """What a resumed run checks its data against: ``sha256:…`` of a local file's bytes (a directory's: of its
    files' names and bytes), ``hub:ID@REVISION`` for a hub id (``hub:ID`` when no revision is cached here);
    None for the arithmetic task, which is generated the same every time."""
    if task != "gsm8k" or dataset is None:
        return None
    path = Path(dataset).expanduser()
    if not path.exists():
        return f"hub:{dataset}" + (f"@{revision}" if (revision := _cached_revision(dataset)) else "")
    digest = hashlib.sha256()
    for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
        if file != path:  # a directory's files: each one's name, then its bytes
            digest.update(str(file.relative_to(path)).encode() + b"\0")
        try:
            digest.update(file.read_bytes())
        except OSError as e:
            raise UsageError(f"--dataset {file}: cannot read it ({e.strerror or type(e).__name__})") from None
    return f"sha256:{digest.hexdigest()}"


def _cached_revision(dataset: str) -> str | None:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(dataset, repo_type="dataset", local_files_only=True)).name
    except Exception:  # noqa: BLE001 - not cached (or not a hub id): the id alone
        return None


def check_unchanged(dataset: str | None, saved: str | None, now: str | None) -> None:
    """``--resume``: refuse, in one line, data that differs from what the run started with (``fingerprint``).
    A checkpoint without a fingerprint, or a hub id whose revision is known on one side only, passes."""
    if saved is None or now is None or saved == now:
        return
    (saved_id, _, saved_revision), (now_id, _, now_revision) = saved.partition("@"), now.partition("@")
    if saved_id == now_id and saved_id.startswith("hub:") and not (saved_revision and now_revision):
        return
    raise UsageError(f"--dataset {dataset} changed since the run started ({_short(saved)} then, {_short(now)} now); "
                     f"put back the data it started with to resume it, or start a new run with another --out")


def _short(fingerprint_: str) -> str:
    return fingerprint_[:19] + "…" if fingerprint_.startswith("sha256:") else fingerprint_


class ProblemStream:
    """The training problems in a shuffled order, reshuffled after each pass; the same order in every
    process (each takes its share of what is drawn). A checkpoint part; it keeps the fingerprint of its
    ``source`` too (--dataset, ``math_problems.fingerprint``) and refuses to resume on data that changed."""

    def __init__(self, problems: list[dict], seed: int, source: tuple[str | None, str | None] = (None, None)):
        self.problems, self.rng, self.order = problems, random.Random(seed), []
        self.source = source

    def draw(self, n: int) -> list[dict]:
        picked = []
        for _ in range(n):
            if not self.order:
                self.order = list(range(len(self.problems)))
                self.rng.shuffle(self.order)
            picked.append(self.problems[self.order.pop()])
        return picked

    def state_dict(self) -> dict:
        return {"rng": self.rng.getstate(), "order": list(self.order), "dataset": self.source[1]}

    def load_state_dict(self, state: dict) -> None:
        dataset, fingerprint = self.source  # the order indexes the problems: they must be those it was drawn from
        check_unchanged(dataset, state.get("dataset"), fingerprint)
        self.rng.setstate(state["rng"])
        self.order = list(state["order"])
