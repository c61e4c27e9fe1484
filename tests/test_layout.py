"""The layout the project keeps: files short enough to read in one sitting, rung functions short enough to
see whole."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 400
MAX_RUNG_FUNCTION_LINES = 60
# Pure data tables, read row by row rather than as a whole: the TRL-to-ladder map.
LONG_TABLES = {"ladder/trl/map.py"}


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _too_long(folder: str, exceptions: set[str] = frozenset()) -> dict[str, int]:
    files = {p.relative_to(ROOT).as_posix(): p for p in sorted((ROOT / folder).rglob("*.py"))}
    return {name: n for name, p in files.items() if name not in exceptions and (n := _line_count(p)) > MAX_FILE_LINES}


def test_no_test_file_is_over_400_lines():
    assert _too_long("tests") == {}


def test_no_package_file_is_over_400_lines_but_the_data_tables():
    assert all((ROOT / name).is_file() for name in LONG_TABLES)   # an exception that no longer exists goes too
    assert _too_long("ladder", LONG_TABLES) == {}


def test_no_function_of_a_rung_is_over_60_lines():
    long = {}
    for path in sorted((ROOT / "ladder" / "rungs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_RUNG_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.name}"] = lines
    assert long == {}
