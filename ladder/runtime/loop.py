"""The one training loop of the ladder: every rung is a ``Recipe`` that this loop drives through a ``RunSession``.

    def train(cfg):                                          # a rung's train, after what precedes its run directory
        return loop.train(cfg, NAME, build, total=cfg.steps)

    def build(cfg, session) -> Recipe: ...                   # the rung's parts, its update, its evaluation

A recipe says what one update is; the loop says when each thing happens. For the update k = 0, 1, …:

    lr ← recipe.learning_rate(k)                             the schedule (None: the optimiser's lr stays)
    stats ← recipe.update()                                  collect → core.Batch → core.update → statistics
                                                             (skipped steps counted by the session's guard)
    evaluate when recipe.clock crosses a multiple of eval_every, and after the last update
    record ← recipe.record(stats + evaluation)               what metrics.jsonl gets (step, wall_s stamped)
    log it, move the bar by the clock's advance, recipe.after_log(record)      (printed samples)
    checkpoint recipe.parts and recipe.progress every --checkpoint-every updates

and before the first update, ``--resume`` restores the parts and the progress (or, on a fresh start,
``recipe.start()`` runs: a step-0 evaluation); after the last, ``recipe.summary()`` becomes summary.json.
A notebook's lab runs a recipe the same way, held in memory (``in_memory``), one ``one_update`` at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ladder.runtime.distributed import Processes
from ladder.runtime.session import RunSession
from ladder.specs import options_dict


def _nothing(*args) -> None:
    """A hook a recipe leaves out."""


def _same(stats: dict) -> dict:
    return stats


def _no_postfix(record: dict) -> dict:
    return {}


def _updates(updates_done: int) -> int:
    return updates_done


@dataclass
class Recipe:
    """One rung's algorithm, as the loop drives it (see the module doc for when each member is called)."""

    parts: dict[str, Any]                       # name → what a checkpoint holds (π_θ, the optimiser, generators, envs)
    progress: dict                              # plain data carried from update to update, restored on --resume
    update: Callable[[], dict]                  # one update: collect → core.Batch → core.update → its statistics
    finished: Callable[[int], bool]             # updates done → nothing left to do (count reached, solved, budget)
    summary: Callable[[], dict]                 # summary.json (the rung's own files written first)
    curves: Callable[[], list]                  # curves.png's ladder.plots.Panel's, drawn when the run ends
    x: str = "step"                             # the curves' x axis
    evaluate: Callable[[], dict] | None = None  # the evaluation's fields for the record (None: no evaluation)
    eval_every: int = 0                         # evaluate when clock crosses a multiple (0: after the last update only)
    clock: Callable[[int], int] = _updates      # updates done → the run's clock (updates, environment steps)
    record: Callable[[dict], dict] = _same      # statistics and evaluation → the record
    optimizer: torch.optim.Optimizer | None = None
    learning_rate: Callable[[int], float] | None = None  # update k → its learning rate (None: fixed)
    start: Callable[[], None] = _nothing        # on a fresh start, before the first update
    after_log: Callable[[dict], None] = _nothing  # after a record is written (printed samples, completions)
    postfix: Callable[[dict], dict] = _no_postfix  # the progress bar's postfix after a record
    checkpoint_last: bool = True                # checkpoint after the last update too


def train(cfg, rung: str, build: Callable[[Any, RunSession], Recipe], total: int, unit: str = "update",
          procs: Processes | None = None) -> dict:
    """Open the run directory, ``build`` the recipe inside it, run it to the end; the summary."""
    with RunSession(cfg, rung, options_dict(cfg), total=total, unit=unit, procs=procs) as session:
        return run(session, build(cfg, session))


def run(session: RunSession, recipe: Recipe) -> dict:
    """Resume (or start), update until the recipe is finished, then write summary.json and curves.png."""
    begin(session, recipe)
    while not recipe.finished(session.step):
        one_update(session, recipe)
    return session.finish(recipe.summary(), recipe.curves(), x=recipe.x)


def begin(session: RunSession, recipe: Recipe) -> None:
    """Before the first update: with --resume, the parts and the progress restored; else ``recipe.start()``."""
    saved = session.resume(**recipe.parts, progress=None).get("progress")
    if saved is None:
        recipe.start()
    else:
        recipe.progress.clear()
        recipe.progress.update(saved)


def in_memory(cfg, rung: str, build: Callable[[Any, RunSession], Recipe], total: int, evaluations: bool = True
              ) -> tuple[RunSession, Recipe]:
    """A run held in memory, begun: no directory, no file, no checkpoint (``RunSession(in_memory=True)``). A notebook's
    lab drives it update by update with ``one_update``, reading each record from ``session.records()``.
    ``evaluations=False``: the recipe's evaluations left out (its ``start`` and ``evaluate``), as a lab's warm-up."""
    session = RunSession(cfg, rung, {}, total=total, in_memory=True)
    recipe = build(cfg, session)
    if not evaluations:
        recipe = replace(recipe, start=_nothing, evaluate=None)
    begin(session, recipe)
    return session, recipe


def one_update(session: RunSession, recipe: Recipe) -> None:
    """Update k = session.step: schedule, update, evaluation when due, record, checkpoint."""
    k = session.step
    if recipe.learning_rate is not None:
        for group in recipe.optimizer.param_groups:
            group["lr"] = recipe.learning_rate(k)
    before = recipe.clock(k)
    stats = recipe.update()
    now, last = recipe.clock(k + 1), recipe.finished(k + 1)
    crossed = bool(recipe.eval_every) and now // recipe.eval_every > before // recipe.eval_every
    if recipe.evaluate is not None and (crossed or last):
        stats.update(recipe.evaluate())
    record = recipe.record(stats)
    session.log(record, advance=now - before, **recipe.postfix(record))
    recipe.after_log(record)
    if recipe.checkpoint_last or not last:
        session.checkpoint(**recipe.parts, progress=recipe.progress)
