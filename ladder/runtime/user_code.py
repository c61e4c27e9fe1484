"""Code ladder does not write (a reward function, an environment, a tool) run with what it prints held, and what
went wrong said in one line.

    printed = []
    try:
        with held_output(printed):
            result = user_function(...)
    except BaseException as e:
        what = f"called {exited(e)}" if exited(e) else f"raised {type(e).__name__}: {one_line(e)}"
        raise UsageError(f"{name} {what}{said(printed)}") from None

What the user's code prints is held while it runs and passed on once it returns; if it raises or exits
(``sys.exit``, or ``argparse`` parsing ladder's own command line), the error stays one line, with the last line it
printed.
"""

from __future__ import annotations

import io
import sys
from contextlib import contextmanager, redirect_stderr, redirect_stdout


@contextmanager
def held_output(printed: list[str] | None):
    """What the user's code prints while inside is held: passed on if it returns (``printed`` None: dropped).
    If it raises or exits, nothing is passed on, so that the error stays one line, and its last printed
    line goes into ``printed`` (argparse prints its usage and the error, then exits)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            yield
    except BaseException:
        if printed is not None:
            printed.extend([line for line in (out.getvalue() + err.getvalue()).splitlines() if line.strip()][-1:])
        raise
    if printed is not None:
        sys.stdout.write(out.getvalue())
        sys.stderr.write(err.getvalue())


def exited(error: BaseException) -> str | None:
    """``sys.exit(2)`` for an exit, None for an exception."""
    return f"sys.exit({'' if error.code is None else repr(error.code)})" if isinstance(error, SystemExit) else None


def said(printed: list[str]) -> str:
    """``; it printed '…'``: the last line the user's code printed before it failed (``held_output``), or ""."""
    return f"; it printed {one_line(printed[-1], 100)!r}" if printed else ""


def one_line(error: BaseException | str, limit: int = 120) -> str:
    """An error's message on one line, cut to ``limit`` characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
