"""One run per directory: an exclusive ``flock`` on ``DIR/.lock``, held by the process writing the directory.

The lock goes with its process, so the lock of a killed run is simply taken over. ``claim`` writes the holder's
process id into the file once the run really takes the directory; a start refused meanwhile names that process.
Without ``flock`` (Windows) nothing is locked: one run per directory is then the user's to keep.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LOCK_NAME = ".lock"


class DirectoryInUse(Exception):
    """Another process holds the directory: ``holder`` is the process id it wrote ("starting": none yet)."""

    def __init__(self, holder: str):
        super().__init__(holder)
        self.holder = holder


class DirectoryLock:
    """An exclusive ``flock`` on ``DIR/.lock``, released when its process ends. Raises DirectoryInUse if another
    process holds it, OSError if the file cannot be made."""

    def __init__(self, directory: Path):
        self.fd, self.path, self.made_file = None, directory / LOCK_NAME, False
        if sys.platform == "win32":
            return
        import fcntl

        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            self.made_file = True
        except FileExistsError:
            fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "starting"
            os.close(fd)
            raise DirectoryInUse(holder) from None
        self.fd = fd

    def claim(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self, remove_file: bool = False) -> None:
        if self.fd is not None:
            if remove_file:  # a refused start leaves the directory as it found it
                self.path.unlink(missing_ok=True)
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None
