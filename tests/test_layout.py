"""The layout the project keeps: files grouped by concern, each package and top-level module named in the
README's map of the package, and functions short enough to see whole (≤ 60 lines). A file is as long as its one
job: no line count decides where a file ends."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 60


def _package_map() -> str:
    """The README's "The package" section: the code block that maps ladder/."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The package"):]
    return section[:section.index("```", section.index("```") + 3)]


def test_every_package_and_top_level_module_is_in_the_readmes_map():
    drawn = _package_map()
    entries = [p.name + ("/" if p.is_dir() else "") for p in (ROOT / "ladder").iterdir()
               if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.name != "__init__.py")]
    missing = [e for e in sorted(entries) if not re.search(rf"(^|\s){re.escape(e)}", drawn, re.MULTILINE)]
    assert missing == [], f"not in the README's map of the package: {missing}"


def test_every_subpackage_of_the_rungs_is_in_the_readmes_map():
    drawn = _package_map()
    packages = [p.name + "/" for p in (ROOT / "ladder" / "rungs").iterdir() if (p / "__init__.py").is_file()]
    assert [p for p in packages if p not in drawn] == []


def _long_functions(folder: Path) -> dict[str, int]:
    long = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.name}"] = lines
    return long


def test_no_function_of_the_package_is_over_60_lines():
    assert _long_functions(ROOT / "ladder") == {}
