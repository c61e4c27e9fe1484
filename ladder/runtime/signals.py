"""SIGINT, SIGTERM and SIGHUP during a run: each stops it as Ctrl-C does, between two writes, so that ``--resume``
continues it (the loop runs every run inside ``stopping``; the command line inside it too, from its first line).

``Interrupts`` is the handler. One signal stops the run (Ctrl-C's ``KeyboardInterrupt``, or ``Interrupted``);
another within ``burst_s`` of it, or any once the command reports the interruption (``reporting``), is ignored, so
the shutdown it started runs to its end. A later one stops the run again: a library that swallowed the first (an
exception raised in a ``__del__`` is only printed) cannot leave a run that no signal stops.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time

from ladder.runtime import early_signals

INTERRUPTS = tuple(getattr(signal, name) for name in early_signals.NAMES if hasattr(signal, name))

Interrupted = early_signals.Stopped  # SIGTERM or SIGHUP raised where Ctrl-C raises its KeyboardInterrupt


class Interrupts:
    """The handler of SIGINT, SIGTERM and SIGHUP around a run (see the module doc)."""

    burst_s = 1.0

    def __init__(self):
        self.last, self.reporting = None, False

    def __call__(self, signum, frame):
        now = time.monotonic()
        if self.reporting or (self.last is not None and now - self.last < self.burst_s):
            return
        self.last = now
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(signum)


def _handle(signums: tuple[int, ...], handler) -> dict:
    """``handler`` for each of ``signums`` that is not ignored (``nohup`` ignores SIGHUP: it stays so) and whose
    handler Python knows; returns the handlers it replaced. Only the main thread may set them."""
    previous = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for signum in signums:
        current = signal.getsignal(signum)
        if current is not None and current is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    return previous


def _installed() -> Interrupts | None:
    """The ``Interrupts`` already handling SIGINT (the command's, around the run), if any."""
    if threading.current_thread() is not threading.main_thread():
        return None
    current = signal.getsignal(signal.SIGINT)
    return current if isinstance(current, Interrupts) else None


@contextlib.contextmanager
def stopping(whole_process: bool = False):
    """Around a run: SIGINT, SIGTERM and SIGHUP stop it as Ctrl-C does (``Interrupts``); handlers already in place
    (the command's) stay. ``whole_process`` (the command line itself): after an interruption, these signals stay
    ignored until the process ends."""
    installed = _installed()
    if installed is not None:
        yield installed
        return
    interrupts = Interrupts()
    previous = _handle(INTERRUPTS, interrupts)
    try:
        yield interrupts
    finally:
        if not (interrupts.reporting and whole_process):
            for signum, handler in previous.items():
                signal.signal(signum, handler)
