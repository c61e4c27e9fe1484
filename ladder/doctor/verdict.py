"""The verdict in one line (a figure's headline, a legend entry), and text made safe to print and to draw."""

from __future__ import annotations

import re

from ladder.doctor.run_data import Run
from ladder.doctor.signatures import Finding, T
from ladder.doctor.wording import WORDING

_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` as any terminal shows it: a byte of a file name that is not UTF-8 (which Python holds as a lone
    surrogate, U+DC80–U+DCFF) as ``\\xe9``, any other lone surrogate (JSON's ``"\\ud800"``) as ``\\ud800``, and
    control characters other than newline and tab escaped too."""
    def escaped(match: re.Match) -> str:
        code = ord(match.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else ascii(match.group())[1:-1]

    return _UNPRINTABLE.sub(escaped, text)


def literal(text: str) -> str:
    """Text matplotlib draws as written: printable, its $ signs not read as mathtext."""
    return printable(text).replace("$", r"\$")


def is_healthy(findings: list[Finding]) -> bool:
    return all(f.severity == "harmless" for f in findings)


def logged_steps(run: Run) -> int:
    """The most logged steps of any one series."""
    return max((len(s) for s in run.series.values()), default=0)


def title(finding: Finding) -> str:
    """The finding's title, in its rung's words (a finding made without them: the signature's common title)."""
    return finding.title or WORDING[finding.name].title


def verdict_line(run: Run, findings: list[Finding], brief: bool = False) -> str:
    """``healthy``, ``too short to judge`` or the problems, by their titles (``2 problems: entropy collapse;
    …``); a healthy run's harmless notes after it. ``brief``: ``healthy`` without the words after it."""
    problems = [title(f) for f in findings if f.severity == "problem"]
    notes = [title(f) for f in findings if f.severity == "harmless"]
    if logged_steps(run) < T.min_points:
        return f"too short to judge: fewer than {T.min_points} logged steps"
    if problems:
        return f"{len(problems)} problem{'s' if len(problems) > 1 else ''}: {'; '.join(problems)}"
    said = "healthy" if brief else "healthy: none of the known failure signatures"
    return said + (f" (notes: {'; '.join(notes)})" if notes else "")


def verdict_colour(run: Run, findings: list[Finding]) -> str:
    if logged_steps(run) < T.min_points:
        return "tab:orange"
    return "tab:green" if is_healthy(findings) else "tab:red"
