"""A command's signals before its own handlers are in place: Ctrl-C, SIGTERM or SIGHUP end it in one line.

``python -m ladder.run`` spends its first second or two importing torch and transformers, before the run's handlers
(``ladder.runtime.signals``) exist. Nothing has been written then, so a signal there simply ends the process:
one line on stderr and exit code 128 + the signal's number (Ctrl-C 130, SIGTERM 143, SIGHUP 129), the same as an
interrupted run, never the traceback of whatever import it landed in. This module imports only the standard
library, so that an entry point can install it before anything heavy.

A short command that writes at most a file whole (the doctor, the course table) runs under ``interruptible``
instead: the signal raises where the program is, so a file being written is left as it was, and the command ends
with the same one line.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

NAMES = ("SIGINT", "SIGTERM", "SIGHUP")


def line(signum: int) -> str:
    """What an interrupted command says last (Ctrl-C's ``^C`` is on the terminal's line already)."""
    return "\ninterrupted" if signum == signal.SIGINT else f"interrupted by {signal.Signals(signum).name}"


def _signals() -> list[int]:
    """The signals this platform has whose handler may be replaced: not ignored (``nohup`` ignores SIGHUP: it stays
    so), and only from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return []
    found = [getattr(signal, name) for name in NAMES if hasattr(signal, name)]
    return [signum for signum in found if signal.getsignal(signum) not in (signal.SIG_IGN, None)]


def _end_now(signum, frame) -> None:
    os.write(2, (line(signum) + "\n").encode())
    os._exit(128 + signum)


def end_quietly_until_handled() -> None:
    """Until the command installs its own handlers: a signal ends the process at once, in one line."""
    for signum in _signals():
        signal.signal(signum, _end_now)


class Stopped(KeyboardInterrupt):
    """A signal, raised where the program was (as Ctrl-C raises ``KeyboardInterrupt``)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum, frame) -> None:
    raise Stopped(signum)


def interruptible(main) -> int:
    """``main()``'s exit code; a signal during it stops it where it is (its files are written whole or not at all)
    and the command ends in one line, with 128 + the signal's number. A second signal while it reports is ignored."""
    signums = _signals()
    for signum in signums:
        signal.signal(signum, _raise)
    try:
        return main()
    except KeyboardInterrupt as e:
        for signum in signums:
            signal.signal(signum, signal.SIG_IGN)
        signum = getattr(e, "signum", signal.SIGINT)
        print(line(signum), file=sys.stderr)
        return 128 + signum
