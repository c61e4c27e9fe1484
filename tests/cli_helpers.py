"""Running ``python -m ladder.run`` as a user would, in a subprocess, or its main in this process."""

from __future__ import annotations

import subprocess
import sys

# The shared tiny GRPO run (conftest's tiny_grpo_run): 8 updates of 2 prompts × 8 completions, a checkpoint
# and a held-out evaluation every 3 updates.
TINY_GRPO_ARGS = ["grpo", "--preset", "tiny", "--steps", "8", "--checkpoint-every", "3", "--eval-every", "3",
                  "--eval-size", "16", "--prompts-per-step", "2", "--print-samples", "0", "--no-progress"]


def run_cli(*args, cwd) -> subprocess.CompletedProcess:
    """``python -m ladder.run ARGS`` in ``cwd``: its exit code, stdout and stderr (2 minutes at most)."""
    return subprocess.run([sys.executable, "-m", "ladder.run", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def run_main(*args, capsys) -> tuple[int, str]:
    """``ladder.run.main(ARGS)`` in this process, as the command line calls it: (its exit code, what it wrote
    on stderr). For bad input, which fails before any model loads; a fresh process costs seconds of imports."""
    from ladder import run

    capsys.readouterr()
    try:
        code = run.main(list(args))
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err
