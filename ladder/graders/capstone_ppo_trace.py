"""A spied run of a learner's ``train``: the calls it makes through its module, recorded as they pass.

    traced_train(m, total_steps, seed) -> Trace

The contract asks ``train`` to call collect_rollout, gae and update by their module-level names. For one run,
the spies take those names' places in the module: each copies what goes in and out, and passes the call on
unchanged. The module's own functions are back in place when the run returns or raises.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import torch
from torch import Tensor

WIRED = ("collect_rollout", "gae", "update")


def as_float(x) -> Tensor:
    """A float32 copy of an obs or a tensor (numpy arrays included), detached from any graph."""
    return torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x.detach(), dtype=torch.float32).clone()


def copied(tensors: dict) -> dict:
    """A copy of a dict of tensors (or arrays); what is neither is kept as it is."""
    return {k: as_float(v) if torch.is_tensor(v) or isinstance(v, np.ndarray) else v for k, v in tensors.items()}


@dataclass
class Rollout:
    """One call of collect_rollout: the obs it started from [N, 4], a copy of its buffer, the next_obs it
    returned, and the agent's parameters when it was called."""
    obs: Tensor
    buffer: dict
    next_obs: Tensor
    weights: list[Tensor]

    @property
    def env_steps(self) -> int:
        """N·T: each of the N envs stepped T times."""
        return self.buffer["rewards"].numel()


@dataclass
class Trace:
    """What one run of train did, call by call: ("collect_rollout", Rollout), ("gae", (advantages, returns)),
    ("update", batch); and what it returned."""
    events: list[tuple[str, object]] = field(default_factory=list)
    agent: object = None
    history: list = field(default_factory=list)

    def calls(self, name: str) -> list:
        return [what for kind, what in self.events if kind == name]

    def updates(self) -> Iterator[tuple[Rollout | None, tuple | None, dict, int]]:
        """For each call of update: the last rollout and the last gae before it, its batch, the env steps so far."""
        rollout, advantages, env_steps = None, None, 0
        for kind, what in self.events:
            if kind == "collect_rollout":
                rollout, env_steps = what, env_steps + what.env_steps
            elif kind == "gae":
                advantages = what
            else:
                yield rollout, advantages, what, env_steps


def _argument(function: Callable, args: tuple, kwargs: dict, name: str, position: int):
    """The argument of a call of ``function`` by the contract's name (or, named otherwise, by its position)."""
    given = inspect.signature(function).bind(*args, **kwargs).arguments
    return given[name] if name in given else list(given.values())[position]


def _spy_rollout(original: Callable, events: list) -> Callable:
    def collect_rollout(*args, **kwargs):
        obs = as_float(_argument(original, args, kwargs, "obs", 2))
        weights = [p.detach().clone() for p in _argument(original, args, kwargs, "agent", 0).parameters()]
        buffer, next_obs = out = original(*args, **kwargs)
        events.append(("collect_rollout", Rollout(obs, copied(buffer), as_float(next_obs), weights)))
        return out
    return collect_rollout


def _spy_gae(original: Callable, events: list) -> Callable:
    def gae(*args, **kwargs):
        advantages, returns = out = original(*args, **kwargs)
        events.append(("gae", (as_float(advantages), as_float(returns))))
        return out
    return gae


def _spy_update(original: Callable, events: list) -> Callable:
    def update(*args, **kwargs):
        events.append(("update", copied(_argument(original, args, kwargs, "batch", 2))))
        return original(*args, **kwargs)
    return update


def traced_train(m: ModuleType, total_steps: int, seed: int) -> Trace:
    """``m.train(total_steps=…, seed=…)`` on one thread, with spies in place of collect_rollout, gae and update."""
    trace = Trace()
    originals = {name: getattr(m, name) for name in WIRED}
    spies = {"collect_rollout": _spy_rollout, "gae": _spy_gae, "update": _spy_update}
    threads = torch.get_num_threads()
    try:
        for name, spy in spies.items():
            setattr(m, name, spy(originals[name], trace.events))
        torch.set_num_threads(1)
        trace.agent, trace.history = m.train(total_steps=total_steps, seed=seed)
    finally:
        torch.set_num_threads(threads)
        for name, original in originals.items():
            setattr(m, name, original)
    return trace


@contextmanager
def kept_global_rngs() -> Iterator[None]:
    """torch's, numpy's and Python's global RNG states, as they were before, once it ends."""
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()
    try:
        yield
    finally:
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])
        random.setstate(states[2])
