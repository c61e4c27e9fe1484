"""Running ``python -m ladder.run`` as a user would, in a process of its own, or its main in this process.

``run_cli`` forks the process from ``ladder.runtime.warm_start``'s fork server, which has imported torch,
transformers and peft once: a process of its own (exit code, output, files, signals), seconds sooner. A test whose
subject is the start itself (signals during the imports, what the imports print, an environment variable the
libraries read when imported) starts ``python`` with ``subprocess`` instead."""

from __future__ import annotations

import subprocess

# The shared tiny GRPO run (conftest's tiny_grpo_run): 8 updates of 2 prompts × 8 completions, a checkpoint
# and a held-out evaluation every 3 updates.
TINY_GRPO_ARGS = ["grpo", "--preset", "tiny", "--steps", "8", "--checkpoint-every", "3", "--eval-every", "3",
                  "--eval-size", "16", "--prompts-per-step", "2", "--print-samples", "0", "--no-progress"]


def run_cli(*args, cwd, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m ladder.run ARGS`` in ``cwd`` (with ``env``, default this process's): its exit code, stdout and
    stderr; killed after ``timeout`` seconds (``subprocess.TimeoutExpired``)."""
    from ladder.runtime import warm_start

    return warm_start.run_command(list(args), cwd=cwd, env=env, timeout=timeout)


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
