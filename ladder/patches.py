"""Where ladder meets a library's moving or private API: one module, each place with why.

A new release of transformers, peft, bitsandbytes or torch changes exactly these lines. The
package's requirements cap each library at its next major version; ``tests/test_no_deprecations.py``
fails as soon as a release deprecates something ladder calls.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

TRANSFORMERS_TESTED = "5.24"  # the newest transformers these patches were checked against


@functools.cache
def cache_arg() -> str:
    """The name under which this transformers passes and returns a key/value cache.

    transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns until 5.40 in a
    model's forward and 6.0 in ``generate``); earlier 5.x releases know only ``past_key_values``.
    """
    from transformers.modeling_outputs import BaseModelOutputWithPast

    fields = {f.name for f in dataclasses.fields(BaseModelOutputWithPast)}
    return "cache" if "cache" in fields else "past_key_values"


def with_cache(cache) -> dict:
    """``{name: cache}`` to pass to a model's forward or to ``generate``, under this version's name."""
    return {cache_arg(): cache}


def cache_of(output):
    """The key/value cache a forward with ``use_cache=True`` returned."""
    return getattr(output, cache_arg())


DEPRECATION = re.compile(r"(FutureWarning|DeprecationWarning|PendingDeprecationWarning)\b|\bdeprecated\b", re.I)
WATCHED = ("transformers", "peft", "accelerate", "bitsandbytes")


def _package_of(path: str) -> str:
    """The top-level package a source file belongs to: ``ladder`` for this package's own files, the
    folder after ``site-packages/`` for an installed one."""
    if Path(path).resolve().is_relative_to(Path(__file__).resolve().parent):
        return "ladder"
    return path.rpartition("site-packages/")[2].split("/")[0] if "site-packages/" in path else ""


def library_deprecations(output: str) -> list[str]:
    """The lines of a run's or a notebook's output that announce a deprecation in a call that ladder
    makes: a warning raised in (or attributed by its stack level to) transformers, peft, accelerate,
    bitsandbytes or ladder itself, or a deprecation logged by one of those libraries (``[transformers] …
    deprecated …``). torch deprecating its own internals to itself is not ours to fix."""
    found = []
    for line in output.splitlines():
        if not DEPRECATION.search(line):
            continue
        warning = re.match(r"\s*(\S+\.py):\d+: \w+", line)
        logged = re.match(r"\s*\[(\w+)\]", line)
        source = _package_of(warning.group(1)) if warning else logged.group(1) if logged else ""
        if source in WATCHED + ("ladder",):
            found.append(line.strip())
    return found
