"""Whatever a run's files hold, read leniently: the doctor diagnoses logs it did not write, so any path and any
JSON value is met with an answer, never a traceback.

    path_kind, file_text, json_file   any path (a directory, a FIFO, nothing there, one that cannot be looked
                                      at) and a file that is not JSON: bad input, one line (UsageError)
    parse_json                        JSON whose numbers beyond a float's range (a 400-digit integer, ``1e400``)
                                      are kept as ``TooLarge``; nesting too deep for the parser is a ValueError
    as_number, as_step                a logged value as a float (None: a non-finite reading; NOT_A_NUMBER) and a
                                      record's step as a whole number ≥ 0 (None: not one); the readers leave out
                                      what is neither, and say so
    shown                             a value as the notes and messages show it
    config_fact                       a config value of the kind a fact needs; another kind is bad input naming
                                      the file and the key
"""

from __future__ import annotations

import json
import math
import stat
from pathlib import Path

from ladder.runtime.errors import UsageError


def path_kind(path: Path) -> str | None:
    """"dir", "file" (a regular one), "other" (a FIFO, a device, …) or None where nothing is; a path that cannot be
    looked at (a name too long, a directory without permission, a loop of links) is bad input."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise UsageError(f"{path}: cannot look at it ({e.strerror or type(e).__name__})") from None
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def file_text(path: Path, errors: str = "strict") -> str:
    """The text of the regular file ``path``: a directory, a FIFO or a device there is bad input, as is a file
    that cannot be read."""
    if path_kind(path) != "file":
        raise UsageError(f"{path} is not a file")
    try:
        return path.read_text(errors=errors)
    except OSError as e:
        raise UsageError(f"{path}: cannot read it ({e.strerror or type(e).__name__})") from None


class TooLarge:
    """A JSON number beyond a float's range (a 400-digit integer, ``1e400``), kept as the text it was written as."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text if len(self.text) <= 20 else f"a {len(self.text)}-digit number"


def _json_int(text: str) -> int | TooLarge:
    if len(text) > 400:  # beyond any float, and past the digits Python parses into an int
        return TooLarge(text)
    try:
        float(int(text))
    except OverflowError:
        return TooLarge(text)
    return int(text)


def _json_float(text: str) -> float | TooLarge:
    value = float(text)
    return value if math.isfinite(value) else TooLarge(text)  # JSON's Infinity and NaN are constants, not here


def parse_json(text: str):
    """JSON, its numbers beyond a float's range as ``TooLarge``; anything else (nesting too deep for the parser
    included) is a ValueError."""
    try:
        return json.loads(text, parse_int=_json_int, parse_float=_json_float)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def json_file(path: Path):
    try:
        return parse_json(file_text(path))
    except ValueError:
        raise UsageError(f"{path} is not valid JSON; is the file complete?") from None


def shown(value) -> str:
    """A logged value as the notes and messages show it: as JSON writes it, cut at 40 characters."""
    if isinstance(value, TooLarge):
        return f"{value}, beyond a float"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


# --- a log's values -------------------------------------------------------------------------------------------

NOT_A_NUMBER = object()  # a string, a boolean, a list, an object, a TooLarge


def as_number(value) -> float | None | object:
    """A logged value as a float; None for a non-finite reading (null, NaN, ±Infinity); NOT_A_NUMBER else."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return NOT_A_NUMBER


def as_step(value) -> int | None:
    """A record's step: a whole number from 0 to 2**53 (3.0 is 3); None for anything else."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2 ** 53:
        return value
    return None


# --- a config's facts -----------------------------------------------------------------------------------------

def _real(value) -> bool:
    return isinstance(as_number(value), float)


KINDS = {  # kind → (test, what the message asks for)
    "count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number ≥ 1"),
    "rate": (lambda v: _real(v) and v >= 0, "a number ≥ 0"),
    "number": (_real, "a number"),
    "name": (lambda v: isinstance(v, str), "a string"),
}


def config_fact(config: dict, key: str, kind: str, where: str, default=None):
    """``config[key]`` if it is of ``kind`` (see KINDS), ``default`` where the key is absent, None where it is
    null; anything else is bad input naming ``where`` (the file) and the key."""
    value = config.get(key, default)
    if value is None:
        return None
    test, wanted = KINDS[kind]
    if not test(value):
        kind_shown = " (a string)" if isinstance(value, str) else ""
        raise UsageError(f"{where}: {json.dumps(key)} is {shown(value)}{kind_shown}; it must be {wanted}")
    return float(value) if kind in ("rate", "number") else value
