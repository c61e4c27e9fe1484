"""Time limits on code ladder does not control: a reward function, an environment's method, a tool, an exercise.

    with time_limit(30, "the environment's reset"):
        prompt = env.reset()

If the body is still running after ``seconds``, ``TimedOut`` is raised inside it, in the calling thread, by a
``SIGALRM`` timer: the call is interrupted where it is (a Python loop, ``time.sleep``, a blocking read), so no
thread is left running past the limit. ``TimedOut`` derives from ``BaseException``, like ``KeyboardInterrupt``:
a learner's ``except Exception`` does not swallow it, and it is raised again every ``REPEAT_S`` seconds until
the body has ended, so a ``finally`` that itself hangs is interrupted too. Raised where Python cannot pass it on
(a ``__del__`` run by the garbage collector), it is dropped silently rather than printed as an ignored exception, and
raised again a millisecond later, most likely in the body.

Limits nest, and an outer timer (another limit, pytest-timeout's) keeps its deadline. Outside the main thread a
signal cannot reach the call, so there the body runs without a limit.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time

REPEAT_S = 1.0  # after the deadline, raised again this often until the body ends
RETRY_S = 1e-3  # after one lost in a finaliser: the collector may run finalisers for a long while, in which every
# alarm would be lost again


class TimedOut(BaseException):
    """A call ran past its limit. ``what`` names the call, as in "the tool 'calc'"."""

    def __init__(self, what: str, seconds: float):
        super().__init__(f"{what} did not return within {seconds:g} s")
        self.what, self.seconds = what, seconds


def _can_limit() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_limit(seconds: float | None, what: str):
    """Raise ``TimedOut(what, seconds)`` in the body once it has run ``seconds``; None or 0: no limit."""
    if not seconds or not _can_limit():
        yield
        return
    start = time.monotonic()
    deadline = start + seconds
    outer_handler = signal.getsignal(signal.SIGALRM)
    outer_left, outer_repeat = signal.getitimer(signal.ITIMER_REAL)
    outer_deadline = start + outer_left if outer_left > 0 else None

    def on_alarm(signum, frame):
        now = time.monotonic()
        if outer_deadline is not None and now >= outer_deadline and callable(outer_handler):
            outer_handler(signum, frame)  # the outer timer's turn (pytest-timeout's, say)
        if now >= deadline:
            raise TimedOut(what, seconds)

    outer_hook = sys.unraisablehook

    def drop_ours(unraisable):
        if not isinstance(unraisable.exc_value, TimedOut):
            outer_hook(unraisable)
        elif threading.current_thread() is threading.main_thread():
            signal.setitimer(signal.ITIMER_REAL, RETRY_S, REPEAT_S)  # again as soon as the finaliser is over

    sys.unraisablehook = drop_ours
    signal.signal(signal.SIGALRM, on_alarm)
    first = seconds if outer_deadline is None else max(1e-3, min(deadline, outer_deadline) - start)
    signal.setitimer(signal.ITIMER_REAL, first, REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, outer_handler)
        sys.unraisablehook = outer_hook
        if outer_deadline is not None:  # the outer timer runs on, from where it was
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, outer_deadline - time.monotonic()), outer_repeat)


def call_with_limit(seconds: float | None, what: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` under ``time_limit(seconds, what)``."""
    with time_limit(seconds, what):
        return fn(*args, **kwargs)
