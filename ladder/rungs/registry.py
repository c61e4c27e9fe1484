"""Every rung, as it declares itself: the modules of ``ladder.rungs`` that hold a ``RUNG``
(``ladder.rungs.protocol.Rung``), found by walking the package — a new rung is a new module (or package) here and
nothing else lists it.

    registry.find("grpo")       the rung's module (``RungCode``): its declaration ``.RUNG`` and its code
    registry.rungs()            name → module of every rung, in their order on the ladder
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType

import ladder.rungs
from ladder.rungs.protocol import Rung
from ladder.runtime.errors import UsageError


def _declares(module: ModuleType) -> bool:
    return isinstance(getattr(module, "RUNG", None), Rung)


@functools.cache
def rungs() -> dict[str, ModuleType]:
    """name → module of every rung of ``ladder.rungs``, ordered by ``Rung.position`` (each module imported)."""
    found = []
    for info in pkgutil.iter_modules(ladder.rungs.__path__, prefix="ladder.rungs."):
        module = importlib.import_module(info.name)
        if _declares(module):
            found.append(module)
    return {m.RUNG.name: m for m in sorted(found, key=lambda m: (m.RUNG.position, m.RUNG.name))}


def find(name: str) -> ModuleType:
    """The rung called ``name``: its module by the naming rule (``ppo-sentiment`` → ``ladder.rungs.ppo_sentiment``)
    without importing the others, else found among all; an unknown name is one line naming the rungs."""
    try:
        module = importlib.import_module(f"ladder.rungs.{name.replace('-', '_')}")
    except (ImportError, ValueError):  # not a module's name
        module = None
    if module is not None and _declares(module) and module.RUNG.name == name:
        return module
    every = rungs()
    if name not in every:
        raise UsageError(f"unknown rung {name!r}; choose one of: {', '.join(every)}")
    return every[name]
