"""The doctor's verdict as text (a healthy run: a short clean bill), as JSON, and as ``doctor.png``: the curve of
each finding's metric with the evidence steps marked."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path

from ladder.doctor.runs import Run
from ladder.doctor.signatures import Finding, T


def is_healthy(findings: list[Finding]) -> bool:
    return all(f.severity == "harmless" for f in findings)


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
    """One panel per finding: its metric over the run, the evidence window's points marked (a healthy run: the
    reward)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(f.metric, f"[{f.severity}] {f.name}", f) for f in findings]
    if not panels:
        panels = [("reward" if run.get("reward") else next(iter(run.series)), "healthy", None)]
    cols = min(2, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.2 * rows), squeeze=False)
    for ax, (metric, title, f) in zip(axes.flat, panels):
        s = run.get(metric)
        if s is not None:
            ax.plot(s.steps, s.values, color="0.4", lw=1)
        if f is not None and f.steps:
            ax.scatter(f.steps, f.values, color="tab:red" if f.severity == "problem" else "tab:blue", s=14, zorder=3,
                       label="evidence")
            ax.legend(loc="best", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel(metric, fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(str(run.path), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
