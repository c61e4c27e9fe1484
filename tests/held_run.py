"""A ``python -m ladder.run`` process held at a known point, so that a test acts on it (starts a second run, kills
it) at a moment that does not depend on which process is faster.

The process runs the real CLI; only ``RunSession.log`` or ``RunSession.checkpoint`` is wrapped: after the first
record was written (``"log"``: the run directory and its lock exist), or after the first call that left a
checkpoint on disk (``"checkpoint"``), it prints ``HELD`` and waits for a line on its stdin. If the process ends
before it gets there, ``wait_until_held`` says so instead of hanging.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HELD = "holding the run here"

SCRIPT = '''
import runpy, sys
from ladder import session

HELD = sys.argv.pop(1)
point = sys.argv.pop(1)
real = getattr(session.RunSession, point)


def held(self, *args, **kwargs):
    out = real(self, *args, **kwargs)
    if not getattr(held, "done", False) and (point == "log" or (self.dir / "checkpoint.pt").exists()):
        held.done = True
        print(HELD, flush=True)
        sys.stdin.readline()
    return out


setattr(session.RunSession, point, held)
sys.argv[0] = "ladder.run"
runpy.run_module("ladder.run", run_name="__main__")
'''


def start(args: list[str], point: str, cwd: Path) -> subprocess.Popen:
    """``python -m ladder.run *args`` in ``cwd``, to be held after its first ``point`` (``"log"``/``"checkpoint"``)."""
    script = Path(cwd) / "held_run.py"
    script.write_text(SCRIPT)
    return subprocess.Popen([sys.executable, str(script), HELD, point, *args], cwd=cwd, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_until_held(proc: subprocess.Popen) -> bool:
    """True once the process holds; False if it ended first (its stdout closed)."""
    return any(line.strip() == HELD for line in iter(proc.stdout.readline, ""))
