"""The one widget shape every view returns: controls, a rendered figure, and the numbers behind it.

A ``View`` is an ``ipywidgets.VBox`` of its controls and an ``Image`` of the figure. The figure is
drawn with matplotlib's object API on an Agg canvas and rendered to PNG bytes, so a view works the
same in Jupyter, in a headless test and under ``nbmake`` — no pyplot state, no display backend.

    view.controls   {name: widget}       set ``.value`` to turn a knob (the view redraws itself)
    view.data       dict                 every number the last drawing plotted
    view.figure     matplotlib Figure    the last drawing

Read without a live kernel (``jupyter nbconvert``, a repository's notebook viewer) a widget has no
state to draw from; a displayed ``View`` therefore also carries its figure as it was when displayed
(``image/png`` beside the widget in the output), which such readers show in its place.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable

import ipywidgets as widgets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def render_png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


class View(widgets.VBox):
    """Controls + figure; ``draw(values) -> (Figure, data)`` is called on every control change."""

    def __init__(self, controls: dict[str, widgets.Widget], draw: Callable[[dict], tuple[Figure, dict]],
                 title: str = ""):
        self.controls = controls
        self.data: dict = {}
        self.figure: Figure | None = None
        self._draw = draw
        self.image = widgets.Image(format="png")
        self.status = widgets.HTML()
        self.title = title
        header = [widgets.HTML(f"<b>{title}</b>")] if title else []
        super().__init__(header + [widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap")),
                                   self.status, self.image])
        for control in controls.values():
            control.observe(lambda _change: self.refresh(), names="value")
        self.refresh()

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def refresh(self) -> None:
        """Recompute from the current control values and redraw."""
        self.figure, self.data = self._draw(self.values())
        self.image.value = render_png(self.figure)
        summary = self.data.get("summary")
        self.status.value = f"<code>{summary}</code>" if summary else ""

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus the figure drawn at display time for readers without a kernel: a
        notebook front end that runs widgets shows the widget, nbconvert and static viewers the PNG."""
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["image/png"] = base64.b64encode(self.image.value).decode("ascii")
        controls = ", ".join(f"{name} = {value!r}" for name, value in self.values().items())
        bundle["text/plain"] = f"{self.title or 'figure'} ({controls})"
        return bundle
