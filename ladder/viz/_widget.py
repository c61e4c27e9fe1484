"""The one widget shape every view returns: controls, a rendered figure, and the numbers behind it.

A ``View`` is an ``ipywidgets.VBox`` of its controls and an ``Image`` of the figure. The figure is
drawn with matplotlib's object API on an Agg canvas and rendered to PNG bytes, so a view works the
same in Jupyter, in a headless test and under ``nbmake`` — no pyplot state, no display backend.

    view.controls   {name: widget}       set ``.value`` to turn a knob (the view redraws itself)
    view.data       dict                 every number the last drawing plotted
    view.figure     matplotlib Figure    the last drawing
"""

from __future__ import annotations

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
