"""Rebuild the tiny models the package ships (``ladder/tasks/tiny_models``) with the code that made them:

    python -m ladder.tasks.rebuild_tiny --rebuild      # about 12 minutes on a CPU

A module of its own: the builders live with their tasks (``arithmetic``, ``sentiment``), which use ``tiny_lm``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from ladder.tasks import tiny_lm


def builders() -> dict[str, Callable[[Path], None]]:
    """Every tiny model the package ships: its version name → the function that builds it."""
    from ladder.tasks import arithmetic, review_models, tiny_agent

    return {review_models.TINY_MODEL_VERSION: review_models.build_tiny_sentiment_model,
            arithmetic.TINY_MODEL_VERSION: arithmetic.build_tiny_math_model,
            arithmetic.TINY_TEACHER_VERSION: arithmetic.build_tiny_math_teacher,
            tiny_agent.TINY_MODEL_VERSION: tiny_agent.build_tiny_agent_model,
            tiny_agent.TINY_GUESS_VERSION: tiny_agent.build_tiny_guess_model}


def rebuild(where: Path = tiny_lm.SHIPPED) -> list[Path]:
    """Build every tiny model into ``where`` (replacing what is there) and remove the versions no longer used."""
    where.mkdir(parents=True, exist_ok=True)
    wanted = builders()
    for old in where.iterdir():
        if old.is_dir() and old.name not in wanted:
            shutil.rmtree(old)
    built = []
    for name, build in wanted.items():
        shutil.rmtree(where / name, ignore_errors=True)
        built.append(tiny_lm.build_into(where / name, build))
        print(f"built {built[-1]}")
    return built


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--rebuild"]:
        print("usage: python -m ladder.tasks.rebuild_tiny --rebuild   (about 12 minutes on a CPU)", file=sys.stderr)
        sys.exit(2)
    rebuild()
