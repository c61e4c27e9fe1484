"""ladder.runtime.limits: a call past its limit is interrupted where it is, in the calling thread — a sleep, a busy
loop, a body that swallows ``Exception`` — and leaves no thread, timer or handler behind; limits nest."""

import signal
import threading
import time

import pytest

from ladder.runtime.limits import TimedOut, call_with_limit, time_limit


def _sleeps():
    time.sleep(3600)


def _spins():
    while True:
        pass


def _swallows_exceptions():
    while True:
        try:
            time.sleep(3600)
        except Exception:  # noqa: BLE001 - a learner's broad except: TimedOut is not an Exception
            pass


@pytest.mark.parametrize("body", [_sleeps, _spins, _swallows_exceptions])
def test_a_body_past_its_limit_is_interrupted_and_leaves_nothing_running(body):
    threads, handler = set(threading.enumerate()), signal.getsignal(signal.SIGALRM)
    timer = signal.getitimer(signal.ITIMER_REAL)
    start = time.monotonic()
    with pytest.raises(TimedOut) as error:
        call_with_limit(0.2, "the tool 'calc'", body)
    assert 0.2 <= time.monotonic() - start < 2.0
    assert str(error.value) == "the tool 'calc' did not return within 0.2 s"
    assert (error.value.what, error.value.seconds) == ("the tool 'calc'", 0.2)
    assert set(threading.enumerate()) == threads
    assert signal.getsignal(signal.SIGALRM) is handler
    assert signal.getitimer(signal.ITIMER_REAL)[0] == pytest.approx(timer[0], abs=1.0)  # an outer timer runs on


def test_a_body_that_returns_in_time_keeps_its_value_and_no_alarm_follows():
    assert call_with_limit(5, "quick", lambda: 42) == 42
    assert call_with_limit(None, "no limit", lambda: 7) == 7
    time.sleep(0.05)  # no late alarm from the limit above


def test_a_body_that_swallows_the_first_timeout_is_interrupted_again():
    caught = []
    start = time.monotonic()
    with pytest.raises(TimedOut):
        with time_limit(0.1, "stubborn"):
            try:
                time.sleep(3600)
            except BaseException as e:  # noqa: BLE001 - swallows even TimedOut, then hangs again
                caught.append(e)
            time.sleep(3600)
    assert len(caught) == 1 and isinstance(caught[0], TimedOut)
    assert time.monotonic() - start < 3.0


def test_limits_nest_and_the_outer_deadline_holds_inside_an_inner_limit():
    start = time.monotonic()
    with pytest.raises(TimedOut) as error:
        with time_limit(0.3, "outer"):
            with time_limit(0.1, "inner"):
                pass
            with pytest.raises(TimedOut, match="inner"):
                with time_limit(0.1, "inner"):
                    time.sleep(3600)
            with time_limit(60, "long inner"):
                time.sleep(3600)
    assert error.value.what == "outer" and time.monotonic() - start < 2.0


def test_outside_the_main_thread_the_body_runs_without_a_limit():
    done = []
    worker = threading.Thread(target=lambda: done.append(call_with_limit(0.01, "in a thread",
                                                                         lambda: time.sleep(0.1) or "ran")))
    worker.start()
    worker.join(10)
    assert done == ["ran"]


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # what pytest makes of a printed one
def test_a_limit_met_inside_a_finaliser_is_not_printed_and_still_ends_the_body():
    """The garbage collector runs ``__del__`` where an exception cannot propagate: Python would print it as
    "Exception ignored in ..."; the limit drops it there and raises it again a millisecond later. Each round of the
    body spends 0.3 s in a finaliser, then 0.45 s outside: the alarm at 0.2 s lands in the first finaliser (or in the
    collection before it, whose first Python code is the finaliser: where the heap is large, most of the time)."""
    import gc

    class SlowToFinalise:
        def __del__(self):
            time.sleep(0.3)

    start = time.monotonic()
    with pytest.raises(TimedOut):
        with time_limit(0.2, "the learner's loop"):
            while True:
                cycle = [SlowToFinalise()]
                cycle.append(cycle)  # only the collector frees it
                del cycle
                gc.collect()
                outside = time.monotonic() + 0.45
                while time.monotonic() < outside:
                    pass
    assert time.monotonic() - start < 5
