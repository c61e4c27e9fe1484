"""Capstone II's watch on the learner's loop: a short run of ``train`` with a spy on each function of the contract.

    spied_run(sol)      train(steps = 2, seed = 0) on the tiny task, each of ``SPIED`` replaced, for the run, by a
                        spy that records what it is given and what it returns: a ``Run``, one ``Step`` per call
                        of ``update``; made once per learner's module and kept
    rerun(sol, steps)   another run, from another state of the global random generators, not kept

The sheet's contract makes ``train`` call these functions by their module-level names, so a spy set as the
module's attribute sees every call. The module's own functions are put back when the run ends, however it ends.
Before each run the global generators (torch's and Python's ``random``) are seeded with a number of the run's own:
a loop that draws from them without seeding them from ``seed`` gives two runs that differ.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import random
import weakref
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .capstone_grpo_task import tiny_task

SPIED = ("sample", "completion_logp", "reward", "group_advantages", "grpo_loss", "update")
SEED, WATCHED_STEPS = 0, 2    # the watched run: train(..., steps=2, seed=0); two steps, to see the prompts change


@dataclass
class Step:
    """What one step of the loop handed to the spied functions, in call order (one step ends with its ``update``)."""
    prompts: list[tuple[int, ...]] = field(default_factory=list)   # each sampled row's prompt tokens, no padding
    completions: list[tuple[int, ...]] = field(default_factory=list)   # each row's sampled tokens (mask 1)
    rewards: list[float] = field(default_factory=list)     # what ``reward`` returned, concatenated
    group_sizes: list[int] = field(default_factory=list)   # the group_size of each ``group_advantages`` call
    samples: list[tuple] = field(default_factory=list)     # each ``sample`` call: (prompt_ids, prompt_mask, τ,
                                                            # ids, mask, logp), detached
    advantages: Tensor | None = None                        # rollout["advantages"] as ``update`` received it
    weights: Tensor | None = None                           # all the model's weights, flat, after ``update``


@dataclass
class Run:
    steps: list[Step]         # the steps that called update, then the one in progress (empty if none)
    calls: Counter            # name → how many times train (or what it calls) called it through the module
    returned: object          # what train returned: (model, history)
    start: Tensor             # the weights before the run, flat


def flat_weights(model: torch.nn.Module) -> Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _arguments(function, args: tuple, kwargs: dict) -> list:
    """The call's arguments in the order of the function's parameters, however they were passed."""
    bound = inspect.signature(function).bind(*args, **kwargs)
    return list(bound.args) + list(bound.kwargs.values())


def _rows(ids: Tensor, mask: Tensor) -> list[tuple[int, ...]]:
    """Each row's real tokens (mask 1), as a tuple of ints."""
    return [tuple(row[m.bool()].tolist()) for row, m in zip(ids.detach(), mask.detach())]


def _record(run: Run, name: str, arguments: list, out) -> None:
    """Keep what the step needs from one call of ``name``; ``update`` closes the step."""
    step = run.steps[-1]
    if name == "sample" and isinstance(out, tuple) and len(out) == 3:
        step.prompts += _rows(arguments[1], arguments[2])
        step.completions += _rows(out[0], out[1])
        step.samples.append((arguments[1].detach(), arguments[2].detach(), float(arguments[4]),
                             *(torch.as_tensor(x).detach() for x in out)))
    elif name == "reward":
        step.rewards += torch.as_tensor(out).detach().float().reshape(-1).tolist()
    elif name == "group_advantages":
        step.group_sizes.append(int(arguments[1]))
    elif name == "update":
        advantages = arguments[2].get("advantages") if isinstance(arguments[2], dict) else None
        if advantages is not None:
            step.advantages = torch.as_tensor(advantages).detach().float().reshape(-1).clone()
        step.weights = flat_weights(arguments[0])
        run.steps.append(Step())


def _spy(run: Run, name: str, function):
    @functools.wraps(function)
    def spy(*args, **kwargs):
        run.calls[name] += 1
        out = function(*args, **kwargs)
        _record(run, name, _arguments(function, args, kwargs), out)
        return out
    return spy


@contextlib.contextmanager
def spies(sol, run: Run):
    """Each function of ``SPIED`` in ``sol`` replaced by its spy; the learner's own put back on the way out."""
    originals = {name: getattr(sol, name) for name in SPIED}
    try:
        for name, function in originals.items():
            setattr(sol, name, _spy(run, name, function))
        yield run
    finally:
        for name, function in originals.items():
            setattr(sol, name, function)


def rerun(sol, steps: int, global_seed: int) -> Run:
    """train(steps, seed = SEED) on a fresh tiny task under the spies, the global generators first seeded with
    ``global_seed`` (Python's ``random`` state put back afterwards; torch's is the caller's ``fork_rng``)."""
    task = tiny_task()
    run = Run([Step()], Counter(), None, flat_weights(task.model))
    state = random.getstate()
    try:
        random.seed(global_seed)
        torch.manual_seed(global_seed)
        with spies(sol, run):
            out = sol.train(task.model, task.tokenizer, task.train, steps=steps, seed=SEED)
    finally:
        random.setstate(state)
    run.returned = out
    return run


_RUNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # learner's module → its watched run


def spied_run(sol) -> Run:
    """The watched run of ``sol``: train(steps = WATCHED_STEPS, seed = SEED), made on the first call and kept."""
    if sol not in _RUNS:
        _RUNS[sol] = rerun(sol, WATCHED_STEPS, global_seed=1)
    return _RUNS[sol]
