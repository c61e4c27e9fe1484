"""A file written whole or not at all: afterwards it holds the new bytes or, if the write was interrupted or
failed, the old ones, never a part of either. The bytes go to a temporary file beside it (``.NAME.tmp``), synced to
the disk, which is renamed over it: a rename is one step, so a process killed at any moment (SIGKILL included)
leaves the file as it was or as it was meant to be, and at most the temporary file beside it (the run directory's
next process removes it: ``ladder.runtime.runlog.LEFTOVERS``).
"""

from __future__ import annotations

import os
from pathlib import Path


def temporary(name: str) -> str:
    """The name a rewrite of ``name`` is written under before it is renamed into place."""
    return f".{name}.tmp"


def write_whole(path: Path, data: bytes) -> None:
    """Afterwards ``path`` holds ``data``; if this is interrupted or fails, what it held before. Raises OSError;
    leaves no temporary file behind (unless the process is killed)."""
    tmp = path.with_name(temporary(path.name))
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
