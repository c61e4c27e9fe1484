"""Loading a model, a tokenizer or a dataset of the sentiment task from the hub or from disk: everything that would
touch the Hugging Face hub goes through ``hub_or_local`` (``ladder.hub``) so that, offline, a hub id that is not
cached fails at once with one line that names ``--preset tiny``."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from ladder.hub import quiet_progress
from ladder.runtime.errors import UsageError

OFFLINE_HINT = "use --preset tiny to train offline (python -m ladder.run ppo-sentiment --preset tiny)"


def hub_or_local(name: str, what: str, flag: str, load: Callable[[str], object], kind: str = "model"):
    """``load(path)`` where ``ladder.hub.resolve`` finds ``name`` (a local path, a hub id while the hub
    answers, or its cached snapshot offline); any failure becomes one ``UsageError`` line."""
    from ladder import hub

    path = hub.resolve(name, flag, kind)
    try:
        with quiet_progress() if Path(path).exists() else nullcontext():
            return load(path)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - a broken path, an unknown id, a network error: one line
        detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise UsageError(f"{flag} {name}: cannot load the {what} ({type(e).__name__}: {detail}); "
                         f"offline? {OFFLINE_HINT}") from None
