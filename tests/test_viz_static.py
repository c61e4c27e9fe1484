"""A view read without a kernel: nbconvert (and a repository's viewer) shows its figure, not ``View(...)``."""

from __future__ import annotations

import base64

import ipywidgets as widgets
import nbformat
from IPython.core.formatters import DisplayFormatter
from matplotlib.figure import Figure
from nbconvert import HTMLExporter, MarkdownExporter

from ladder.viz._widget import View

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _view() -> View:
    def draw(values):
        fig = Figure(figsize=(2, 2))
        fig.add_subplot().plot([0, values["slope"]])
        return fig, {"slope": values["slope"]}
    return View({"slope": widgets.IntSlider(value=3, min=0, max=9)}, draw, "a line")


def _executed_notebook(view: View) -> nbformat.NotebookNode:
    """A notebook whose one cell displayed ``view``, as a kernel would have saved it (no widget state)."""
    data, metadata = DisplayFormatter().format(view)
    cell = nbformat.v4.new_code_cell("view", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data=data, metadata=metadata)]
    nb = nbformat.v4.new_notebook()
    nb.cells = [cell]
    return nb


def test_the_display_carries_the_widget_and_its_first_figure():
    view = _view()
    data, _ = DisplayFormatter().format(view)
    assert "application/vnd.jupyter.widget-view+json" in data          # a live front end draws the widget
    assert base64.b64decode(data["image/png"]).startswith(PNG_MAGIC)  # a static reader the figure
    assert base64.b64decode(data["image/png"]) == view.image.value
    assert "View(" not in data["text/plain"] and "slope = 3" in data["text/plain"]


def test_the_figure_follows_the_knobs_at_display_time():
    view = _view()
    first = DisplayFormatter().format(view)[0]["image/png"]
    view.controls["slope"].value = 8
    assert DisplayFormatter().format(view)[0]["image/png"] != first


def test_nbconvert_without_widget_state_shows_the_figure():
    nb = _executed_notebook(_view())
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert "data:image/png;base64," in html
    assert "View(" not in html
    markdown, resources = MarkdownExporter().from_notebook_node(nb)
    assert "View(" not in markdown and resources["outputs"], "the markdown export keeps the figure as a file"
