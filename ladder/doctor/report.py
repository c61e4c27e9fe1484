"""The doctor's verdict as text (a healthy run: a short clean bill), as JSON, and as ``doctor.png``: the run's vital
signs, each finding marked (``ladder.doctor.chart``)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ladder.doctor.chart_parts import PLOT_BOUND, write_figure  # noqa: F401 - PLOT_BOUND also read from here
from ladder.doctor.runs import Run
from ladder.doctor.signatures import Finding, T
from ladder.doctor.verdict import is_healthy, printable  # noqa: F401 - also read from here


def text_report(run: Run, findings: list[Finding]) -> str:
    steps = max((len(s) for s in run.series.values()), default=0)
    lines = [f"{run.path}: a {run.source} {run.rung} run, {steps} logged step{'s' if steps != 1 else ''}"]
    lines += [f"  note: {note}" for note in run.notes]
    if run.unknown:
        lines.append(f"  not known (TRL's defaults assumed): {'; '.join(run.unknown)}")
    problems = [f for f in findings if f.severity == "problem"]
    if steps < T.min_points:
        lines.append(f"too short to judge: the signatures need at least {T.min_points} logged steps")
    elif not problems:
        lines.append("healthy: none of the known failure signatures"
                     + (" (only harmless ones, below)" if findings else ""))
    else:
        lines.append(f"{len(problems)} problem(s) found")
    for f in findings:
        lines += [f"\n[{f.severity}] {f.name}: {f.saw}",
                  f"  means:  {f.means}",
                  f"  change: {f.change}",
                  f"  read:   {f.section}"]
    return "\n".join(lines)


def json_report(run: Run, findings: list[Finding]) -> dict:
    return {"run": str(run.path), "source": run.source, "rung": run.rung, "healthy": is_healthy(findings),
            "notes": run.notes, "unknown": run.unknown, "findings": [asdict(f) for f in findings]}


def plot_findings(run: Run, findings: list[Finding], path: Path) -> None:
    """doctor.png of one run at ``path`` (``ladder.doctor.chart``): its vital signs with their thresholds, the
    findings marked and named, the verdict on top. Written whole or not at all; a place it cannot be written is bad
    input."""
    from ladder.doctor.chart import run_figure

    write_figure(run_figure(run, findings), path)
