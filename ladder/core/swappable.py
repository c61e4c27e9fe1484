"""The functions an exercise mirrors, each called through one table, so ``--use-exercises`` can replace it.

    @swappable
    def gae(rewards, values, dones, gamma, lam, ...): ...

makes ``gae`` a thin caller of ``IMPLEMENTATIONS["gae"]``: the core's own function, until
``ladder.graders.swap`` puts the learner's there for a run. Whoever holds ``gae`` — a rung calling
``core.gae``, a module that imported it by name, a dict, a ``functools.partial``, a default argument —
calls whatever the table holds, so no call escapes the swap. ``gae.core`` is the core's own function
(the graders' oracle); ``help(gae)`` and its signature are the core's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

IMPLEMENTATIONS: dict[str, Callable] = {}   # function name → the implementation every call runs


def swappable(function: Callable) -> Callable:
    """Register ``function`` as the implementation of its name, and return the caller that looks it up."""
    name = function.__name__
    if name in IMPLEMENTATIONS:
        raise ValueError(f"two swappable functions named {name}")
    IMPLEMENTATIONS[name] = function

    @functools.wraps(function)
    def call(*args, **kwargs):
        return IMPLEMENTATIONS[name](*args, **kwargs)

    call.core = function
    return call
