"""Notebooks 4 and 5 follow the course's conventions: an opening with goals and a duration, a prediction
before every widget with its answer after it, and a closing self-check of predictions and
reasons checked against what the code computes."""

import json
import re
from pathlib import Path

import pytest
from notebook_helpers import closing_self_check_questions

HERE = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = [HERE / "4_ppo_rlhf_sentiment.ipynb", HERE / "5_grpo_qlora.ipynb"]


def cells(path):
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


def shows_a_widget(kind, source):
    lines = source.strip().splitlines()
    return kind == "code" and "_view(" in source and re.fullmatch(r"\w+", lines[-1].strip()) is not None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_opening_says_what_and_how_long(path):
    kind, first = cells(path)[0]
    bullets = [line for line in first.splitlines() if line.startswith("* ")]
    assert kind == "markdown" and 2 <= len(bullets) <= 4 and re.search(r"about \d+ minutes", first)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_widget_has_a_prediction_before_and_an_answer_after(path):
    nb = cells(path)
    widgets = [i for i, (kind, source) in enumerate(nb) if shows_a_widget(kind, source)]
    assert widgets
    for i in widgets:
        assert nb[i - 1][0] == "markdown" and nb[i - 1][1].startswith("**Predict first.**"), nb[i][1]
        after = [source for kind, source in nb[i + 1:i + 4] if kind == "markdown"]
        assert any("Answer" in source for source in after), nb[i][1]


@pytest.mark.parametrize("path", [*NOTEBOOKS, HERE / "6_design_space_and_trl.ipynb"], ids=lambda p: p.name)
def test_closes_with_predictions_and_reasons_checked_by_the_code(path):
    closing_self_check_questions([{"type": kind, "text": text} for kind, text in cells(path)])


@pytest.mark.parametrize("path", sorted(HERE.glob("*.ipynb")), ids=lambda p: p.name)
def test_no_markdown_cell_holds_a_control_character(path):
    """A "\\v" or "\\t" in a non-raw string becomes a control character, and "$\\varepsilon$" shows "arepsilon"."""
    for i, (kind, text) in enumerate(cells(path)):
        control = sorted({repr(ch) for ch in text if ord(ch) < 32 and ch != "\n"})
        assert kind != "markdown" or not control, f"cell {i}: {control}"
