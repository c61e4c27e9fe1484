"""Write the course notebooks (stripped: no outputs) from their text in ``text_toy.py``, ``text_policies.py``,
``text_llm.py``, ``text_design.py``, ``text_objectives.py``, ``text_foundations.py``, ``text_agents.py``,
``text_doctor.py``, ``text_preferences.py`` and ``text_distill.py``.

    python notebooks/build.py

Edit the text there, not in the .ipynb files, so the notebooks stay reviewable as plain Python
(``tests/test_notebooks.py`` checks the committed notebooks are what this writes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import text_agents  # noqa: E402
import text_design  # noqa: E402
import text_distill  # noqa: E402
import text_doctor  # noqa: E402
import text_foundations  # noqa: E402
import text_llm  # noqa: E402
import text_objectives  # noqa: E402
import text_policies  # noqa: E402
import text_preferences  # noqa: E402
import text_toy  # noqa: E402

NOTEBOOKS = dict(sorted({**text_toy.NOTEBOOKS, **text_foundations.NOTEBOOKS, **text_policies.NOTEBOOKS,
                         **text_llm.NOTEBOOKS, **text_design.NOTEBOOKS, **text_objectives.NOTEBOOKS,
                         **text_agents.NOTEBOOKS, **text_doctor.NOTEBOOKS, **text_preferences.NOTEBOOKS,
                         **text_distill.NOTEBOOKS}.items()))   # by name: 0, 1, 10, 1b, 2, …


def build(out_dir: Path = HERE) -> list[Path]:
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                       "language_info": {"name": "python"}}
        nb.cells = [nbformat.v4.new_markdown_cell(c[3:].lstrip("\n")) if c.startswith("md:")
                    else nbformat.v4.new_code_cell(c) for c in cells]
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"cell-{i:02d}"  # stable ids (nbformat 4.5): a rebuild changes only what changed
        path = Path(out_dir) / f"{name}.ipynb"
        nbformat.write(nb, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in build():
        print(path)
