"""Capstone I's small contract clauses, each a property of one function that the value checks cannot see.

    gae_inputs        gae leaves its inputs as they were (the gae property hands it copies)
    update_generator  update shuffles with the generator it is given, and with nothing else
    update_stats      update returns a dict of floats (no tensor with a graph)
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import torch

from .capstone_ppo_cases import gae_cases, run_update
from .capstone_ppo_harness import rows_of
from .capstone_ppo_trace import kept_global_rngs


def check_gae_inputs(m: ModuleType) -> str | None:
    what, case = gae_cases()[5]   # N = 3, T = 8: terminations, truncations, noise in final_values elsewhere
    kept = {k: v.clone() for k, v in case.items() if torch.is_tensor(v)}
    m.gae(**case)
    changed = [k for k, v in kept.items() if not torch.equal(case[k], v)]   # untouched: the very same bits
    if changed:
        return (f"gae inputs: gae({what}, …) changed its input {', '.join(changed)} in place: "
                f"leave the inputs as they are (compute into new tensors, or on a .clone())")
    return None


def _minibatch_rows(m: ModuleType, generator_seed: int, global_seed: int) -> tuple[list, str]:
    """The rows of each minibatch the learner's update scored, the generator and the global RNGs seeded as given."""
    with kept_global_rngs():
        _, batch, steps, where, _ = run_update(m, 1e3, generator_seed=generator_seed, global_seed=global_seed)
    return [None if s["minibatch"] is None else rows_of(s["minibatch"], batch["obs"]) for s in steps], where


def check_update_generator(m: ModuleType) -> str | None:
    first, where = _minibatch_rows(m, generator_seed=1, global_seed=101)
    if not first or None in first:
        return f"update generator: {where}: needs the minibatches right first (see the minibatches property)"
    if first != _minibatch_rows(m, generator_seed=1, global_seed=202)[0]:
        return (f"update generator: {where}, twice with generator=torch.Generator().manual_seed(1), the global RNGs "
                f"(torch, numpy, random) seeded differently: the minibatches differ; shuffle with the generator "
                f"(torch.randperm(n, generator=generator))")
    if first == _minibatch_rows(m, generator_seed=2, global_seed=101)[0]:
        return (f"update generator: {where}: generator seeds 1 and 2 gave the same minibatches: the shuffle must "
                f"draw from the generator it is given")
    return None


def _not_a_float(value) -> str | None:
    """Why ``value`` is no float of the stats (None: float(value) is the number it holds)."""
    if torch.is_tensor(value):
        if value.requires_grad:
            return "a tensor with a graph (it keeps the graph alive: .item())"
        return None if value.dim() == 0 else f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (str, bytes)) or np.ndim(value) != 0:
        return f"a {type(value).__name__}"
    try:
        float(value)
    except (TypeError, ValueError):
        return f"a {type(value).__name__}, not a number"
    return None


def check_update_stats(m: ModuleType) -> str | None:
    _, _, _, where, stats = run_update(m, 1e3)
    if not isinstance(stats, dict):
        return f"update stats: {where} returned a {type(stats).__name__}; the contract asks for a dict of floats"
    for key, value in stats.items():
        if why := _not_a_float(value):
            return f"update stats: {where}: stats[{key!r}] is {why}; each value must be a float"
    return None
