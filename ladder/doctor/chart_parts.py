"""The pieces doctor.png is drawn from, for one run or several: the grid of panels under a headline, a series, a
panel's guides (threshold lines, healthy bands), the evidence of a finding, and the file written whole.

Sizes follow curves.png (``ladder.plots``): 4.5 × 3.2 inch panels at matplotlib's default font sizes, 90 dpi.
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

from ladder.doctor.run_data import Series
from ladder.doctor.signatures import Finding
from ladder.doctor.verdict import literal
from ladder.doctor.vitals import Guide, Vital
from ladder.plots import PANEL_H, PANEL_W, X_LABELS
from ladder.runtime.errors import UsageError
from ladder.runtime.whole_files import write_whole

PLOT_BOUND = 1e300  # matplotlib's axes cannot span more than a float: a curve beyond this is drawn at it
PROBLEM, NOTE = "tab:red", "0.45"  # a problem's colour; a harmless note's
GUIDE_COLOUR, BAND_COLOUR = "0.3", "tab:green"
SYMLOG_FLOOR = 1e-4  # a log-scale panel is linear below this (a KL of exactly 0 at the first step)


def grid(panels: int) -> tuple[int, int]:
    """(rows, columns): one row up to three panels, 2 × 2 for four, rows of three up to nine, then of four."""
    cols = panels if panels <= 3 else 2 if panels == 4 else 3 if panels <= 9 else 4
    return math.ceil(panels / cols), cols


TITLE_WIDTH = 32      # characters of a panel title's line, at its size, across one panel
TITLE_LINE_H = 0.22   # inches: one more line of a panel title


def title_room(titles: list[str]) -> float:
    """Inches more headline the top row's titles need, beyond one line each."""
    top_row = titles[:grid(max(1, len(titles)))[1]]
    return TITLE_LINE_H * max((t.count("\n") for t in top_row), default=0)


def panel_figure(titles: list[str], header: float):
    """A figure of one axes per title (at least one) under ``header`` inches of headline, and the room its top
    row's titles need; unused cells removed."""
    from matplotlib.figure import Figure

    panels = len(titles)
    header += title_room(titles)
    rows, cols = grid(max(1, panels))
    width, height = PANEL_W * cols, (PANEL_H + 0.35) * rows + header
    fig = Figure(figsize=(width, height))
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[panels:]:
        fig.delaxes(ax)
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - header / height,
                        wspace=0.4, hspace=0.6)
    return fig, axes[:panels]


def bounded(values: list[float]) -> list[float]:
    return [min(max(v, -PLOT_BOUND), PLOT_BOUND) for v in values]


def draw_series(ax, series: Series, label: str | None, **style) -> None:
    """One series against the update; few points (an evaluation) with markers, a lone one labelled."""
    sparse = len(series) < 50
    ax.plot(series.steps, bounded(series.values), label=literal(label) if label else None,
            marker="o" if sparse else None, markersize=6 if len(series) == 1 else 2.5, **style)
    if len(series) == 1:
        ax.annotate(f"{series.values[0]:.3g}", (series.steps[0], bounded(series.values)[0]), xytext=(-7, 5),
                    textcoords="offset points", ha="right")


def draw_guides(ax, guides: list[Guide]) -> None:
    """Each threshold as a labelled dashed line, each healthy band shaded and labelled."""
    for guide in guides:
        if guide.high is None:
            ax.axhline(guide.low, color=GUIDE_COLOUR, linestyle="--", linewidth=1, label=literal(guide.label))
        else:
            ax.axhspan(guide.low, guide.high, color=BAND_COLOUR, alpha=0.1, label=literal(guide.label))


def mark_evidence(ax, finding: Finding, on_line: bool, colour: str, label: str | None) -> None:
    """The finding's evidence: its points on the panel's curve, or (a count such as skipped updates, not on
    this axis) a vertical line at each of its steps."""
    if on_line:
        ax.scatter(finding.steps, bounded(finding.values), s=40, color=colour, edgecolors="black", linewidths=0.5,
                   zorder=3, label=literal(label) if label else None)
        return
    for i, step in enumerate(finding.steps):
        ax.axvline(step, color=colour, linewidth=1.5, alpha=0.7, label=literal(label) if label and i == 0 else None)


def finish_axes(ax, vital: Vital, beyond: bool, steps: tuple[int, int]) -> None:
    """Axis labels with units, the y-scale, the y range at least ``vital.at_least`` (data beyond it widen it), the
    run's span of updates (``steps``: first, last) with whole-update ticks, a grid, and the legend if anything is
    labelled."""
    import matplotlib.ticker

    if vital.log_scale:
        top = ax.get_ylim()[1]
        ax.set_yscale("symlog", linthresh=SYMLOG_FLOOR)
        ax.set_ylim(0, top * 3)  # a decade's third of room above the highest curve or threshold
    if vital.at_least is not None:
        low, high = ax.get_ylim()
        ax.set_ylim(low if vital.at_least[0] is None else min(low, vital.at_least[0]),
                    high if vital.at_least[1] is None else max(high, vital.at_least[1]))
    if steps[1] > steps[0]:
        margin = 0.03 * (steps[1] - steps[0])
        ax.set_xlim(steps[0] - margin, steps[1] + margin)
    ax.set_xlabel(X_LABELS["step"])
    ax.set_ylabel(literal(vital.unit) + (f"\n(drawn within ±{PLOT_BOUND:g})" if beyond else ""))
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator("auto", steps=[1, 2, 2.5, 5, 10], integer=True))
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", loc="best")


def frame(ax, colour: str) -> None:
    """A problem's panel framed in its colour, thicker: found at a glance."""
    for spine in ax.spines.values():
        spine.set_color(colour)
        spine.set_linewidth(2)


def step_span(series: list[Series]) -> tuple[int, int]:
    """(first, last) logged step over ``series``."""
    steps = [step for s in series for step in s.steps] or [0]
    return min(steps), max(steps)


def is_beyond(series: Series) -> bool:
    return max(abs(v) for v in series.values) > PLOT_BOUND


def finding_title(vital_title: str, found: list[tuple[Finding, str]]) -> tuple[str, str]:
    """(the panel's title, its colour): the vital, then each finding in words (``whose`` names the run in a
    comparison); red with a problem, grey with only harmless notes."""
    from ladder.doctor.wording import WORDING

    lines = [vital_title]
    for f, whose in found:
        mark = "⚠" if f.severity == "problem" else "note:"
        title = f.title or WORDING[f.name].title
        words = f"{mark} {title}{whose}".replace(" = ", "\u00a0=\u00a0")   # "μ·M = 1" stays whole
        lines.append(textwrap.fill(words, TITLE_WIDTH).replace("\u00a0", " "))
    if any(f.severity == "problem" for f, _ in found):
        return "\n".join(lines), PROBLEM
    return "\n".join(lines), NOTE if found else "black"


def write_figure(fig, path: Path) -> None:
    """The figure as a PNG at ``path``, written whole or not at all; a place it cannot be written is bad input."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    try:
        write_whole(Path(path), buffer.getvalue())
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or type(e).__name__}") from None
