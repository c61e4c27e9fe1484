"""A ``python -m ladder.run`` process held at a known point, so that a test acts on it (starts a second run, kills
it, sends it a signal) at a moment that does not depend on which process is faster.

The process runs the real CLI; only the call at the hold point is wrapped. There it prints ``HELD`` and waits for a
line on its stdin (a signal sent meanwhile lands in that wait, inside the call). The points:

    "log"              after the first record was written (the run directory and its lock exist)
    "checkpoint"       after the first call of ``RunSession.checkpoint`` that left a checkpoint on disk
    "replace:NAME[:K]" just before the K-th (default first) ``os.replace`` of a file named NAME: a rewrite's
                       temporary file renamed into place (".metrics.jsonl.tmp": the cut back of metrics.jsonl on
                       --resume; in an --overwrite start ".config.json.tmp" is first the copy of the old config set
                       aside, then, the 2nd time, the new config, once the whole old run is set aside), or a file
                       moved (an --overwrite start setting "metrics.jsonl" aside)
    "save:K"           inside the K-th ``torch.save`` of the run (its K-th checkpoint), after its first write: the
                       file is partly written

If the process ends before it gets there, ``wait_until_held`` says so instead of hanging.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

HELD = "holding the run here"

SCRIPT = '''
import os, runpy, sys
from pathlib import Path

import torch

from ladder.runtime import session

HELD = sys.argv.pop(1)
kind, _, where = sys.argv.pop(1).partition(":")


def hold():
    print(HELD, flush=True)
    sys.stdin.readline()


def hold_after(point):
    real = getattr(session.RunSession, point)

    def held(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        if not getattr(held, "done", False) and (point == "log" or (self.dir / "checkpoint.pt").exists()):
            held.done = True
            hold()
        return out

    setattr(session.RunSession, point, held)


def hold_before_replace(name, nth):
    real, seen = os.replace, []

    def held(src, dst, *args, **kwargs):
        if Path(src).name == name:
            seen.append(src)
            if len(seen) == nth:
                hold()
        return real(src, dst, *args, **kwargs)

    os.replace = held


class HeldFile:
    """The file torch.save writes into; its second write waits (the first is already in the file)."""

    def __init__(self, file):
        self.file, self.writes = file, 0

    def write(self, data):
        self.writes += 1
        if self.writes == 2:
            hold()
        return self.file.write(data)

    def flush(self):
        self.file.flush()


def hold_inside_save(nth):
    real, saves = torch.save, []

    def held(obj, f, *args, **kwargs):
        saves.append(f)
        return real(obj, HeldFile(f) if len(saves) == nth else f, *args, **kwargs)

    torch.save = held


if kind in ("log", "checkpoint"):
    hold_after(kind)
elif kind == "replace":
    name, _, nth = where.partition(":")
    hold_before_replace(name, int(nth or 1))
elif kind == "save":
    hold_inside_save(int(where))
else:
    raise SystemExit(f"held_run: unknown hold point {kind!r}")
sys.argv[0] = "ladder.run"
runpy.run_module("ladder.run", run_name="__main__")
'''


def as_a_shell_starts_it() -> None:
    """A child's signals as a shell leaves them (``preexec_fn``): SIGINT, SIGTERM and SIGHUP at their defaults, none
    blocked. Across exec a process keeps its parent's ignored signals and blocked mask: a library of the test process
    that left one ignored or blocked would make every signal a test sends its run a no-op."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def start(args: list, point: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """``python -m ladder.run *args`` in ``cwd``, to be held at ``point`` (see the module doc). ``args`` may hold
    bytes (a path that is not UTF-8)."""
    script = Path(cwd) / "held_run.py"
    script.write_text(SCRIPT)
    return subprocess.Popen([sys.executable, str(script), HELD, point, *args], cwd=cwd, text=True, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=as_a_shell_starts_it)


def wait_until_held(proc: subprocess.Popen) -> bool:
    """True once the process holds; False if it ended first (its stdout closed)."""
    return any(line.strip() == HELD for line in iter(proc.stdout.readline, ""))


@contextlib.contextmanager
def held(args: list, point: str, cwd: Path, env: dict | None = None):
    """``start``, as a context: a process still running at the end (a test that failed first) is killed."""
    proc = start(args, point, cwd, env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def stop(proc: subprocess.Popen, signum: int) -> subprocess.CompletedProcess:
    """Send ``signum`` to a held process and wait for it to end: its exit code (-signum if the signal killed it),
    stdout and stderr."""
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
