"""Running ``python -m ladder.run`` as a user would, in a subprocess."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args, cwd) -> subprocess.CompletedProcess:
    """``python -m ladder.run ARGS`` in ``cwd``: its exit code, stdout and stderr (2 minutes at most)."""
    return subprocess.run([sys.executable, "-m", "ladder.run", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)
