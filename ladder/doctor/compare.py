"""Several runs on one figure: the same vital signs overlaid, one colour per run, each run labelled by its directory
and the flags where the configs of runs of its kind (ladder's, TRL's) differ, with its verdict in the legend.

Thresholds that hold for every run (``Vital.guides``) are drawn once; a finding's evidence is marked in its run's
colour, ringed in red for a problem, and named in the panel's title with the run's directory.
"""

from __future__ import annotations

from ladder.doctor.chart import lands_on
from ladder.doctor.chart_parts import (
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
from ladder.doctor.verdict import literal, verdict_line
from ladder.doctor.vitals import Vital, of_rung, series_names, vitals_of
from ladder.plots import shown

# config keys that say where or how a run was made, not what it learns
NOT_FLAGS = {"out", "resume", "overwrite", "progress", "threads", "processes", "report_to", "checkpoint_every",
             "print_samples", "output_dir", "logging_dir", "run_name", "disable_tqdm"}
MOST_FLAGS = 3
LONGEST_VALUE = 16   # characters of a flag's value in the legend; a longer one (a prompt, a path) is cut
LONGEST_FLAGS = 60   # characters of a run's flags in the legend, so that the line fits the figure
STYLES = ("-", "--", ":", "-.")  # a panel's lines of one run: its first, second, …


def short_names(runs: list[Run]) -> list[str]:
    """Each run's directory name, with as many parent folders as it takes to tell the runs apart."""
    parts = [run.path.resolve().parts for run in runs]
    for depth in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return [shown(name) for name in names]
    return [shown(str(run.path)) for run in runs]


def flag(run: Run, key: str) -> str:
    """A config key as the user wrote it: ``--lr 0.01`` (ladder), ``learning_rate=0.01`` (TRL)."""
    value = shown(str(run.config[key]))
    if len(value) > LONGEST_VALUE:
        value = value[:LONGEST_VALUE - 1] + "…"
    return f"{key}={value}" if run.source == "trl" else f"--{key.replace('_', '-')} {value}"


def differing_flags(runs: list[Run]) -> list[list[str]]:
    """Per run, the flags whose values differ among the runs of its kind (ladder's with ladder's)."""
    flags = []
    for run in runs:
        kin = [other for other in runs if other.source == run.source]
        keys = [key for key in run.config if key not in NOT_FLAGS and len(kin) > 1
                and len({repr(other.config.get(key)) for other in kin}) > 1]
        shown_flags = [flag(run, key) for key in keys if key in run.config]
        if len(shown_flags) > MOST_FLAGS:
            shown_flags = shown_flags[:MOST_FLAGS] + [f"+{len(shown_flags) - MOST_FLAGS} more"]
        flags.append(shown_flags)
    return flags


def key(i: int) -> str:
    """The letter a run goes by in the panels' titles: A, B, …, Z, then AA, AB, …"""
    return key(i // 26 - 1) + chr(ord("A") + i % 26) if i >= 26 else chr(ord("A") + i)


def run_labels(runs: list[Run], findings: list[list[Finding]]) -> list[str]:
    """``B · dir · grpo  --lr 0.01 — 1 problem: KL to π_ref blowing up`` for each run (``· TRL`` for a TRL run)."""
    labels = []
    for i, (run, name, flags) in enumerate(zip(runs, short_names(runs), differing_flags(runs))):
        kind = "TRL" if run.source == "trl" else run.rung
        said = verdict_line(run, findings[i], brief=True)
        said_flags = " ".join(flags)
        if len(said_flags) > LONGEST_FLAGS:
            said_flags = said_flags[:LONGEST_FLAGS - 1] + "…"
        labels.append(f"{key(i)} · {name} · {kind}{'  ' + said_flags if flags else ''} — {said}")
    return labels


def shared_vitals(runs: list[Run]) -> list[Vital]:
    """Every vital any run logged, in the order of the first run's rung, one panel per title."""
    order = [v for run in runs for v in of_rung(run.rung)]
    logged = {v.title for run in runs for v in vitals_of(run)}
    kept: dict[str, Vital] = {}
    for vital in order:
        if vital.title in logged and vital.title not in kept:
            kept[vital.title] = vital
    return list(kept.values())


def drawn_for(vital: Vital, run: Run) -> dict[str, str]:
    """The series of ``run`` a shared vital draws: none where the run's own rung has no vital of that title (a PPO
    run's loss is not a DPO loss, a reward model's margin not DPO's implicit one)."""
    if vital.title not in {v.title for v in of_rung(run.rung)}:
        return {}
    return series_names(vital, list(run.series))


def compared_panels(runs: list[Run], findings: list[list[Finding]]) -> list[tuple[Vital, list[tuple[int, Finding]]]]:
    """Each shared vital with the (run index, finding) pairs marked on it; a finding no vital shows, on a panel of
    its own series (a problem's first)."""
    panels = []
    for vital in shared_vitals(runs):
        found = [(i, f) for i, run in enumerate(runs) for f in findings[i]
                 if lands_on(vital, f, drawn_for(vital, run))]
        panels.append((vital, found))
    placed = {id(f) for _, found in panels for _, f in found}
    own: dict[str, tuple[Vital, list[tuple[int, Finding]]]] = {}
    for i, found in enumerate(findings):
        for f in (f for f in found if id(f) not in placed):
            own.setdefault(f.metric, (Vital(f.metric, f.metric, {f.metric: ""}), []))[1].append((i, f))
    first = [p for p in own.values() if any(f.severity == "problem" for _, f in p[1])]
    last = [p for p in own.values() if p not in first]
    return first + panels + last


def grouped(found: list[tuple[int, Finding]]) -> list[tuple[Finding, str]]:
    """One (finding, `` (A, C)``) per signature on a panel: which runs show it, by their letters."""
    whose: dict[str, list[int]] = {}
    first: dict[str, Finding] = {}
    for i, f in found:
        whose.setdefault(f.name, []).append(i)
        first.setdefault(f.name, f)
    return [(first[name], f" ({', '.join(key(i) for i in runs)})") for name, runs in whose.items()]


def draw_compared(ax, runs: list[Run], vital: Vital, found: list[tuple[int, Finding]]) -> None:
    """One vital of every run that logged it, each in its colour (its panel lines apart by style), the shared
    thresholds, each finding's evidence and, in the title, the finding in words with its run."""
    beyond = False
    for i, run in enumerate(runs):
        drawn = drawn_for(vital, run)
        for k, name in enumerate(drawn):
            draw_series(ax, run.series[name], None, color=f"C{i}", linestyle=STYLES[k % len(STYLES)], linewidth=1.5)
            beyond = beyond or is_beyond(run.series[name])
        for f in (f for j, f in found if j == i):
            label = f"evidence: {f.name} ({key(i)})" if f.severity == "problem" else None
            mark_evidence(ax, f, f.metric in drawn, f"C{i}" if f.severity == "problem" else "0.6", label)
    styles = {label: STYLES[k % len(STYLES)] for run in runs
              for k, label in enumerate(drawn_for(vital, run).values()) if label}
    for label, style in styles.items():  # which line is which, in grey: the colours are the runs
        ax.plot([], [], color="0.4", linestyle=style, label=label)
    draw_guides(ax, list(vital.guides))
    title, colour = finding_title(vital.title, grouped(found))
    ax.set_title(literal(title), color=colour, fontweight="bold" if colour == PROBLEM else "normal")
    if colour == PROBLEM:
        frame(ax, PROBLEM)
    finish_axes(ax, vital, beyond, step_span([s for run in runs for s in run.series.values()]))


def compare_figure(runs: list[Run], findings: list[list[Finding]]):
    """The ``matplotlib.figure.Figure`` of several runs compared: the legend of runs (each with its verdict) on
    top, then the vitals any of them logged."""
    from matplotlib.lines import Line2D

    panels = compared_panels(runs, findings)
    header = 0.75 + 0.28 * len(runs)
    fig, axes = panel_figure([finding_title(vital.title, grouped(found))[0] for vital, found in panels], header)
    top = 1 - 0.12 / fig.get_figheight()
    fig.suptitle(f"{len(runs)} runs compared", fontweight="bold", y=top, va="top")
    handles = [Line2D([], [], color=f"C{i}", linewidth=2.5, label=literal(label))
               for i, label in enumerate(run_labels(runs, findings))]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.45 / fig.get_figheight()),
               frameon=False, fontsize="large")
    for ax, (vital, found) in zip(axes, panels):
        draw_compared(ax, runs, vital, found)
    return fig
