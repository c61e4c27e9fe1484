"""The doctor's verdict as text (a healthy run: a short clean bill), as JSON, and as ``doctor.png``: the curve of
each finding's metric with the evidence steps marked."""

from __future__ import annotations

import contextlib
import math
import os
import re
from dataclasses import asdict
from pathlib import Path

from ladder.doctor.runs import Run
from ladder.doctor.signatures import Finding, T
from ladder.errors import UsageError

_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` as any terminal shows it: a byte of a file name that is not UTF-8 (which Python holds as a lone
    surrogate, U+DC80–U+DCFF) as ``\\xe9``, any other lone surrogate (JSON's ``"\\ud800"``) as ``\\ud800``, and
    control characters other than newline and tab escaped too."""
    def escaped(match: re.Match) -> str:
        code = ord(match.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else ascii(match.group())[1:-1]

    return _UNPRINTABLE.sub(escaped, text)


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


def _literal(text: str) -> str:
    """Text matplotlib draws as written: printable, its $ signs not read as mathtext."""
    return printable(text).replace("$", r"\$")


# matplotlib's axes cannot span more than a float: a curve beyond this is drawn at it
PLOT_BOUND = 1e300


def plot_findings(run: Run, findings: list[Finding], path: Path) -> None:
    """One panel per finding: its metric over the run, the evidence window's points marked (a healthy run: the
    reward). Written whole or not at all (beside ``path``, then renamed into place); a place it cannot be written
    is bad input."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        _draw(run, findings, tmp)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):  # not ours to remove if it is a directory
            tmp.unlink()
        raise UsageError(f"cannot write {path}: {e.strerror or type(e).__name__}") from None


def _draw(run: Run, findings: list[Finding], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(f.metric, f"[{f.severity}] {f.name}", f) for f in findings]
    if not panels:
        panels = [("reward" if run.get("reward") else next(iter(run.series), ""), "healthy", None)]
    cols = min(2, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.2 * rows), squeeze=False)
    try:
        for ax, (metric, title, f) in zip(axes.flat, panels):
            s = run.get(metric)
            if s is not None:
                ax.plot(s.steps, _bounded(s.values), color="0.4", lw=1)
            if f is not None and f.steps:
                ax.scatter(f.steps, _bounded(f.values), color="tab:red" if f.severity == "problem" else "tab:blue",
                           s=14, zorder=3, label="evidence")
                ax.legend(loc="best", fontsize=8)
            ax.set_title(_literal(title), fontsize=9)
            ax.set_xlabel("step")
            beyond = s is not None and max(abs(v) for v in s.values) > PLOT_BOUND
            ax.set_ylabel(_literal(metric) + (f" (drawn within ±{PLOT_BOUND:g})" if beyond else ""), fontsize=8)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        fig.suptitle(_literal(str(run.path)), fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=90, format="png")
    finally:
        plt.close(fig)


def _bounded(values: list[float]) -> list[float]:
    return [min(max(v, -PLOT_BOUND), PLOT_BOUND) for v in values]
