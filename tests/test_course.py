"""The concept table (``ladder.course``) is true cell by cell, and the README holds exactly it."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from ladder import course, options
from ladder.graders import EXERCISES
from ladder.rungs import registry
from ladder.specs import spec_fields
from ladder.trl import map as trl_map

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "notebooks"))
from build import NOTEBOOKS  # noqa: E402  (notebooks/build.py: every notebook's cells)

ROWS = [pytest.param(c, id=f"{i:02d}-{c.core.rpartition('.')[2]}") for i, c in enumerate(course.CONCEPTS, 1)]


def notebook(number: int) -> str:
    names = [name for name in NOTEBOOKS if name.split("_")[0] == str(number)]
    assert len(names) == 1, f"no single notebook numbered {number}: {names}"
    return names[0]


def headings(name: str) -> list[str]:
    """The ``##`` titles of one notebook's Markdown cells."""
    return [line[3:].strip() for cell in NOTEBOOKS[name] if cell.startswith("md:")
            for line in cell[3:].splitlines() if line.startswith("## ")]


def resolve(dotted: str):
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("row", ROWS)
def test_the_section_is_a_heading_of_the_notebook(row):
    assert row.section in headings(notebook(row.notebook)), (row.section, headings(notebook(row.notebook)))


@pytest.mark.parametrize("row", [r for r in ROWS if r.values[0].exercise is not None])
def test_the_exercise_is_a_sheet_for_the_core_function(row):
    assert (ROOT / "exercises" / f"{row.exercise}.py").is_file()
    sheet = {e.stem: e for e in EXERCISES}[row.exercise]
    where = sheet.module if "." in sheet.module else "ladder.core"
    assert f"{where}.{sheet.function}" == row.core, (row.exercise, sheet.function, row.core)


@pytest.mark.parametrize("row", ROWS)
def test_the_core_function_imports(row):
    assert row.core.startswith(("ladder.core.", "ladder.rungs."))   # exercise 20 mirrors the grpo rung's step
    assert callable(resolve(row.core))


@pytest.mark.parametrize("row", [r for r in ROWS if r.values[0].flag is not None])
def test_the_flag_is_an_option_of_the_rung(row):
    rung_name, flag, *value = row.flag.split(" ", 2)
    assert rung_name in registry.rungs()
    config = registry.find(rung_name).Config
    domains = {f"--{f.name.replace('_', '-')}": options.domain_of(f) for f in dataclasses.fields(config)}
    domains |= {p.dashed: p.domain for _, spec in spec_fields(config) for p in spec.params()}  # a spec's flags
    assert flag in domains, f"{rung_name} has no {flag}"
    if value:  # a value the option accepts: one of its choices
        assert domains[flag].problem(value[0]) is None, (flag, value)


@pytest.mark.parametrize("row", [r for r in ROWS if r.values[0].trl is not None])
def test_the_trl_name_is_in_the_map(row):
    trl_class, _, trl_field = row.trl.partition(".")
    if trl_field:
        assert trl_map.for_field(trl_class, trl_field), f"ladder.trl.map has no {row.trl}"
    else:
        assert trl_class in trl_map.trl_classes()


def test_the_table_follows_the_notebooks_and_covers_every_exercise():
    numbers = [c.notebook for c in course.CONCEPTS]
    assert numbers == sorted(numbers, key=lambda n: (int(n.rstrip("abcdefghijklmnopqrstuvwxyz")), n))  # 1, 1b, …, 10
    assert {e.stem for e in EXERCISES} <= {c.exercise for c in course.CONCEPTS}


@pytest.mark.parametrize("exercise", [e.stem for e in EXERCISES])
def test_each_sheet_names_its_notebook_section(exercise):
    doc = ast.get_docstring(ast.parse((ROOT / "exercises" / f"{exercise}.py").read_text()))
    assert doc.splitlines()[2] == course.sheet_line(exercise), doc.splitlines()[:3]


def test_the_readme_holds_exactly_the_printed_table():
    printed = subprocess.run([sys.executable, "-m", "ladder.course"], capture_output=True, text=True, check=True,
                             cwd=ROOT).stdout.strip()
    assert printed == course.markdown()
    readme = (ROOT / "README.md").read_text()
    assert printed in readme
    tables = [block for block in readme.split("\n\n") if block.startswith("| concept |")]
    assert tables == [printed]
