"""A lab's training runs kept on disk, so that a notebook and the tests that check its lab share one computation.

    @on_disk
    def env_token_run(train_env_tokens, steps=24, ...): ...      # trains; returns plain data and tensors

The first call with given arguments computes the result and keeps it under ``$LADDER_CACHE/labs``
(``torch.save``); a later call with the same arguments — in this process or another — reads it back. The key is
the function's module and name, its arguments as called (defaults filled in) and what made it
(``run_cache.made_by``: ladder's source, the libraries' versions, the CPU kernel variables): a change to any code
makes every result anew, and a result is never read under another kernel variant. A result is written whole (a
temporary file renamed into place) and made by one process at a time (a lock file; a second one waits and reads it).
Only ladder's own results are kept there, and only they are read back; one that cannot be read is made again.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import inspect
import json
import os

import torch


def _path(function, args, kwargs):
    from ladder.run_cache import made_by
    from ladder.tasks.tiny_lm import cache_dir

    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    call = {"function": f"{function.__module__}.{function.__qualname__}", "made_by": made_by(),
            "arguments": bound.arguments}
    key = hashlib.sha256(json.dumps(call, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return cache_dir() / "labs" / f"{function.__name__}-{key}.pt"


def on_disk(function):
    """``function``'s result computed once per machine and code version (see the module's docstring)."""

    @functools.wraps(function)
    def cached(*args, **kwargs):
        path = _path(function, args, kwargs)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.exists():
                try:
                    return torch.load(path, weights_only=False)
                except Exception:  # noqa: BLE001 -- damaged by hand or by another tool: made again
                    path.unlink()
            result = function(*args, **kwargs)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            torch.save(result, partial)
            partial.replace(path)
            return result

    return cached
