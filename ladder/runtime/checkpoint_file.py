"""checkpoint.pt and its sum: a run's resumable state, saved whole or not at all and refused on load if its bytes
changed since it was saved.

    checkpoint.pt         the state, as ``torch.save`` writes it
    checkpoint.pt.sha256  its sha256, as ``sha256sum`` writes it
    checkpoint.pt.tmp     a save under way, renamed over checkpoint.pt once written and synced

The sum is taken while torch.save writes (each byte hashed on its way to the file), so a save reads nothing back.
While a new checkpoint replaces the old one, checkpoint.pt.sha256 lists the sums of both, then the new one alone:
an interruption at any moment (Ctrl-C, SIGTERM, SIGKILL) leaves a checkpoint.pt whose sum is listed, so a good
checkpoint is never refused. On load, a sum that is none of those listed is a checkpoint damaged since (a failing
disk, a copy cut short), which torch.load may not notice. A checkpoint without the file (saved before checkpoints
had sums) is not checked.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from ladder.runtime.whole_files import write_whole

NAME = "checkpoint.pt"
CHECKSUMS = f"{NAME}.sha256"
TEMPORARY = f"{NAME}.tmp"


class CorruptCheckpoint(Exception):
    """checkpoint.pt is corrupt or partial; the message says how that showed."""


class CheckpointFile:
    """``DIR/checkpoint.pt`` with ``DIR/checkpoint.pt.sha256`` beside it."""

    def __init__(self, directory: Path):
        self.path, self.sums_path, self.tmp_path = directory / NAME, directory / CHECKSUMS, directory / TEMPORARY
        self.digest = None  # the sha256 of checkpoint.pt, once read or written

    def save(self, state: dict) -> None:
        """Atomic and checked. ``state`` is written beside checkpoint.pt (hashed on its way, synced), then renamed
        over it; checkpoint.pt.sha256 lists the new sum and the previous one until the rename is done, then the new
        one. An interruption or a failed write leaves the previous checkpoint, its sum, and no temporary file.
        Raises what stopped it (``_what_stopped``): KeyboardInterrupt, OSError, or torch's own RuntimeError."""
        try:
            digest = _save_hashed(state, self.tmp_path)
            self._write_sums([digest, self._current_digest()])
            os.replace(self.tmp_path, self.path)
            self.digest = digest
            self._write_sums([digest])
        except (OSError, RuntimeError) as e:
            self.tmp_path.unlink(missing_ok=True)
            raise _what_stopped(e) from None
        except BaseException:  # Ctrl-C or SIGTERM while saving: no half-written file stays behind
            self.tmp_path.unlink(missing_ok=True)
            raise

    def load(self):
        """What checkpoint.pt holds, its sum checked first. Raises CorruptCheckpoint: bytes changed since the save,
        or a file torch.load cannot read."""
        self._check_sum()
        try:
            return torch.load(self.path, weights_only=False)
        except Exception as e:  # noqa: BLE001 - any unreadable file is the same problem
            raise CorruptCheckpoint(type(e).__name__) from None

    def _write_sums(self, digests: list[str | None]) -> None:
        """checkpoint.pt.sha256: one ``sha256sum`` line for each sum a good checkpoint.pt may have now."""
        lines = [f"{digest}  {self.path.name}\n" for digest in digests if digest is not None]
        write_whole(self.sums_path, "".join(lines).encode())

    def _current_digest(self) -> str | None:
        """The sha256 of the checkpoint.pt on disk (None: there is none)."""
        if self.digest is None and self.path.exists():
            self.digest = _sha256_of(self.path)
        return self.digest

    def _check_sum(self) -> None:
        """Refuse a checkpoint.pt whose sha256 is none of those checkpoint.pt.sha256 lists; no file: no check."""
        if not self.sums_path.exists():
            return
        digest = _sha256_of(self.path)
        listed = {line.split()[0] for line in self.sums_path.read_text(errors="replace").splitlines()
                  if line.strip()}
        if digest not in listed:
            raise CorruptCheckpoint(f"its sha256 is not the one {CHECKSUMS} recorded when it was saved")
        self.digest = digest


def _what_stopped(error: OSError | RuntimeError) -> BaseException:
    """What stopped a save. torch.save reports a failed write into the file, or an interruption that landed there,
    as a RuntimeError of its own ("unexpected pos"), raised while the real one was handled: that one (an
    interruption, a full disk) is what stopped it; torch's own failure is itself."""
    seen = error
    while seen is not None:
        if isinstance(seen, (KeyboardInterrupt, OSError)):
            return seen
        seen = seen.__context__
    return error


class _HashingFile:
    """The file torch.save writes a checkpoint into (front to back: it never seeks), hashing the bytes on their way."""

    def __init__(self, file):
        self.file, self.sha256 = file, hashlib.sha256()

    def write(self, data) -> int:
        self.sha256.update(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


def _save_hashed(state: dict, path: Path) -> str:
    """torch.save ``state`` into ``path``, synced to the disk; returns the sha256 of the bytes written."""
    with path.open("wb") as f:
        hashing = _HashingFile(f)
        torch.save(state, hashing)
        f.flush()
        os.fsync(f.fileno())
    return hashing.sha256.hexdigest()


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
