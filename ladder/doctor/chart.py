"""doctor.png of one run: its vital signs (``ladder.doctor.vitals``), each panel with the thresholds its signatures
use, a finding's evidence marked on its panel and named in the panel's title, under the run's rung and name and the
verdict in one line.

A finding whose series is on no vital's panel gets a panel of its own: a problem's first, a harmless note's last.
"""

from __future__ import annotations

from ladder.doctor.chart_parts import (
    NOTE,
    PROBLEM,
    draw_guides,
    draw_series,
    finding_title,
    finish_axes,
    frame,
    is_beyond,
    mark_evidence,
    panel_figure,
    step_span,
)
from ladder.doctor.run_data import Run
from ladder.doctor.signatures import Finding
from ladder.doctor.verdict import literal, verdict_colour, verdict_line
from ladder.doctor.vitals import Vital, own_guides, series_names, vitals_of
from ladder.plots import shown

HEADER = 0.95  # inches: the title and the verdict


def run_title(run: Run) -> str:
    """``grpo · my-run`` (``· TRL`` for a TRL output directory)."""
    name = shown(run.path.resolve().name)
    return f"{run.rung} · {name}" + (" · TRL" if run.source == "trl" else "")


def lands_on(vital: Vital, finding: Finding, drawn: dict[str, str]) -> bool:
    return finding.metric in drawn or finding.metric in vital.marks


def panels_of(run: Run, findings: list[Finding]) -> list[tuple[Vital, list[Finding]]]:
    """Each vital the run logged with the findings marked on it; a finding no vital shows, on a panel of its own
    series (a problem's before the vitals, a harmless note's after)."""
    logged = list(run.series)
    panels = [(v, [f for f in findings if lands_on(v, f, series_names(v, logged))]) for v in vitals_of(run)]
    placed = {id(f) for _, found in panels for f in found}
    own = [(Vital(f.metric, f.metric, {f.metric: ""}), [f]) for f in findings if id(f) not in placed]
    first = [p for p in own if p[1][0].severity == "problem"]
    last = [p for p in own if p[1][0].severity != "problem"]
    return first + panels + last


def draw_panel(ax, run: Run, vital: Vital, found: list[Finding]) -> None:
    """One vital of one run: its series, its guides, the evidence of each finding on it, its title."""
    drawn = series_names(vital, list(run.series))
    for name, label in drawn.items():
        draw_series(ax, run.series[name], label or None, linewidth=1.5)
    draw_guides(ax, [*vital.guides, *own_guides(vital, run)])
    for f in found:
        colour = PROBLEM if f.severity == "problem" else NOTE
        mark_evidence(ax, f, f.metric in drawn, colour, f"evidence: {f.name}")
    title, colour = panel_title(vital, found)
    ax.set_title(literal(title), color=colour, fontweight="bold" if colour == PROBLEM else "normal")
    if colour == PROBLEM:
        frame(ax, PROBLEM)
    beyond = any(is_beyond(run.series[name]) for name in drawn)
    finish_axes(ax, vital, beyond, step_span(list(run.series.values())))


def panel_title(vital: Vital, found: list[Finding]) -> tuple[str, str]:
    return finding_title(vital.title, [(f, "") for f in found])


def run_figure(run: Run, findings: list[Finding]):
    """The ``matplotlib.figure.Figure`` of one run's doctor.png."""
    panels = panels_of(run, findings)
    fig, axes = panel_figure([panel_title(vital, found)[0] for vital, found in panels], HEADER)
    fig.suptitle(literal(run_title(run)), fontweight="bold", y=1 - 0.12 / fig.get_figheight(), va="top")
    fig.text(0.5, 1 - 0.5 / fig.get_figheight(), literal(verdict_line(run, findings)), ha="center", va="top",
             color=verdict_colour(run, findings), fontsize="large")
    for ax, (vital, found) in zip(axes, panels):
        draw_panel(ax, run, vital, found)
    if not panels:
        fig.text(0.5, 0.5, "no metrics recorded", ha="center", va="center")
    return fig
