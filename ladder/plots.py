"""curves.png: a run's learning curves, one panel per quantity, under a title naming the rung and the run.

Each rung describes its panels as ``Panel``s: the metrics (``metrics.jsonl`` keys) drawn in it, the y-axis
label, and optionally a threshold line (CartPole's solve return) or a value measured before the first
update (grpo's held-out accuracy at step 0). A panel with nothing to draw is left out, and the grid has no
empty cells. Evaluations are sparse, so they are drawn with markers; a lone one is labelled with its value.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

X_LABELS = {"step": "update", "env_steps": "environment steps"}
PANEL_W, PANEL_H, TITLE_H = 4.5, 3.2, 0.45  # inches


@dataclass(frozen=True)
class Panel:
    """One panel: each metric of ``lines`` (key → legend label, "" when it is the panel's only line)
    against the x-axis."""

    title: str
    ylabel: str
    lines: dict[str, str]
    threshold: float | str | None = None  # a dashed horizontal line (a template until ``filled``)
    threshold_label: str = ""
    before: dict[str, float] = field(default_factory=dict)  # key → its value at x = 0, before any update

    def filled(self, **values) -> Panel:
        """The panel with its texts and threshold filled in: ``"{solve_return}"`` → the run's option."""
        threshold = self.threshold.format(**values) if isinstance(self.threshold, str) else self.threshold
        return replace(self, title=self.title.format(**values), ylabel=self.ylabel.format(**values),
                       lines={k: label.format(**values) for k, label in self.lines.items()},
                       threshold=None if threshold is None else float(threshold),
                       threshold_label=self.threshold_label.format(**values))

    def starting_at(self, **values: float) -> Panel:
        """The panel with the values measured before the first update (drawn at x = 0) of its own metrics."""
        return replace(self, before={**self.before, **{k: v for k, v in values.items() if k in self.lines}})


def _series(records: list[dict], key: str, x: str, before: dict[str, float]) -> list[tuple[float, float]]:
    points = [(r[x], r[key]) for r in records if r.get(key) is not None and r.get(x) is not None]
    if before.get(key) is not None:
        points.insert(0, (0, before[key]))
    return points


def _panels(curves) -> list[Panel]:
    """``Panel``s as given, or the plain form {key: title} (one metric per panel, the title as its y-label)."""
    if isinstance(curves, dict):
        return [Panel(title, title, {key: ""}) for key, title in curves.items()]
    return list(curves)


def _grid(n: int) -> tuple[int, int]:
    """(rows, columns): one row up to three panels, 2 × 2 for four, then rows of three."""
    cols = n if n <= 3 else 2 if n == 4 else 3
    return math.ceil(n / cols), cols


def _draw(ax, panel: Panel, records: list[dict], x: str) -> None:
    import matplotlib.ticker

    for key, label in panel.lines.items():
        points = _series(records, key, x, panel.before)
        if not points:
            continue
        xs, ys = zip(*points)
        sparse = len(xs) < 50
        ax.plot(xs, ys, marker="o" if sparse else None, markersize=7 if len(xs) == 1 else 3, label=label or None)
        if len(xs) == 1:  # a single evaluation: the dot, and what it measured
            ax.annotate(f"{ys[0]:.3g}", (xs[0], ys[0]), xytext=(-7, 5), textcoords="offset points", ha="right")
    if panel.threshold is not None:
        ax.axhline(panel.threshold, color="grey", linestyle="--", linewidth=1, label=panel.threshold_label or None)
    if any(line.get_label() and not line.get_label().startswith("_") for line in ax.get_lines()):
        ax.legend(fontsize="small", loc="best")
    ax.set_title(panel.title)
    ax.set_ylabel(panel.ylabel)
    ax.set_xlabel(X_LABELS.get(x, x))
    # steps and env steps are counts: whole ticks, spaced as matplotlib's default would space them
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator("auto", steps=[1, 2, 2.5, 5, 10], integer=True))
    ax.grid(alpha=0.3)


def figure(records: list[dict], curves, title: str, x: str = "step"):
    """The ``matplotlib.figure.Figure`` of curves.png: the panels that have data, under ``title``."""
    from matplotlib.figure import Figure

    panels = [p for p in _panels(curves) if any(_series(records, k, x, p.before) for k in p.lines)]
    rows, cols = _grid(max(1, len(panels)))
    width, height = PANEL_W * cols, PANEL_H * rows + TITLE_H
    fig = Figure(figsize=(width, height))
    fig.suptitle(title, fontweight="bold")
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax, panel in zip(axes, panels):
        _draw(ax, panel, records, x)
    for ax in axes[len(panels):]:  # a last row that is not full: no empty frames
        fig.delaxes(ax)
    if not panels:
        fig.text(0.5, 0.5, "no metrics recorded yet", ha="center", va="center")
    # Fixed margins (in inches, so any number of rows looks alike): tight_layout would render the figure twice.
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.2 / width, bottom=0.5 / height,
                        top=1 - (TITLE_H + 0.3) / height, wspace=0.35, hspace=0.55)
    return fig


def shown(name: str) -> str:
    """A file name as text to draw: bytes that are not text in the file system's encoding (``caf\\xe9``, decoded
    with surrogateescape) become U+FFFD, which every font has."""
    return os.fsencode(name).decode(sys.getfilesystemencoding(), errors="replace")


def plot_curves(records: list[dict], curves, path: Path, x: str = "step", rung: str | None = None):
    """Write curves.png to ``path``, titled with the rung and the run (its directory's name); returns the
    figure. ``curves``: a list of ``Panel``s, or {metric key: panel title}."""
    path = Path(path)
    title = f"{rung} · {shown(path.parent.name)}" if rung else shown(path.parent.name)
    fig = figure(records, curves, title, x=x)
    fig.savefig(path, dpi=90)
    return fig
