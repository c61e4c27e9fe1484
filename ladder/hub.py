"""Hub ids and local paths, resolved before anything heavy starts.

A local directory or file is used as it is. A hub id is used as it is when the Hugging Face hub
answers; when it does not (offline, firewalled), a copy already in the local cache is used, and
otherwise the run stops at once with one line — instead of minutes of retries and a traceback.
"""

from __future__ import annotations

import functools
import os
import socket
from contextlib import contextmanager
from pathlib import Path

from ladder.runtime.errors import UsageError

HUB_HOST = "huggingface.co"


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    try:
        socket.create_connection((HUB_HOST, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def resolve(name: str, flag: str, kind: str = "model") -> str:
    """``name`` itself (local path, or hub id with the hub reachable), or the cached snapshot of it."""
    if Path(name).expanduser().exists():
        return str(Path(name).expanduser())
    if hub_reachable():
        return name
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, repo_type=kind, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached, malformed id: the same answer for the user
        raise UsageError(f"{flag} {name!r} is not a local path and the Hugging Face hub cannot be reached "
                         f"(offline?); use --preset tiny, or pass a local {'directory' if kind == 'model' else 'file'}"
                         ) from None


@contextmanager
def quiet_progress():
    """No "Loading weights" bars while loading from disk (they would precede a one-line error)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is a dependency
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    if was_enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
