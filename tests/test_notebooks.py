"""The notebooks are committed clean: no outputs, no execution counts; they import from ladder.

(Running them top to bottom is ``pytest --nbmake notebooks/``, part of the default ``pytest``.)
"""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_the_notebooks_are_there_in_order():
    numbers = [p.name.split("_")[0] for p in NOTEBOOKS]
    in_order = sorted(numbers, key=lambda n: (int(n.rstrip("abcdefghijklmnopqrstuvwxyz")), n))  # 1, 1b, …, 9, 10
    assert in_order == ["0", "1", "1b", "2", "3", "4", "5", "6", "6b", "7", "8", "9", "10"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped(path):
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name} cell {i} has outputs"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_teaches_and_uses_the_package(path):
    nb = json.loads(path.read_text())
    markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "$" in markdown                           # equations
    assert "ladder" in code
    longest = max((len("".join(c["source"]).splitlines()) for c in nb["cells"] if c["cell_type"] == "code"),
                  default=0)
    assert longest <= 25, f"{path.name}: a code cell of {longest} lines — import it from ladder instead"


def test_committed_notebooks_are_what_build_py_writes(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebook_build", NOTEBOOKS[0].parent / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    written = build.build(tmp_path)
    assert [p.name for p in written] == [p.name for p in NOTEBOOKS]
    for fresh, committed in zip(written, NOTEBOOKS):
        assert fresh.read_text() == committed.read_text(), f"{committed.name}: run python notebooks/build.py"
