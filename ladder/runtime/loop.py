"""The one training loop of the ladder: every rung's ``build(cfg, session)`` returns a ``Recipe``; this loop drives it.

    def train(cfg):                                          # every rung's train
        return loop.train(cfg, NAME, build)

    def build(cfg, session) -> Recipe: ...                   # the rung's parts (its model loaded here), its plan

A recipe is four methods and a plan (``Plan``: plain data). The recipe says what one update is; the loop says when
each thing happens, and owns what every run needs. For the update k = 0, 1, … while k < plan.updates and not
recipe.done:

    lr ← plan.learning_rate(k), set on recipe.optimizer       the schedule (None: the optimiser's lr stays)
    stats ← recipe.update()                                  collect → core.Batch → core.update → statistics
    the non-finite guard reads stats' skipped_steps of its optimizer_steps (the run stops after too many in a row)
    stats += recipe.evaluate() when the clock (the record's plan.clock field) crosses a multiple of plan.eval_every,
             and after the last update
    log the record (step and wall_s stamped), move the bar by the clock's advance
    checkpoint recipe.state() every --checkpoint-every updates (and after the last, unless plan.checkpoint_last is off)

Before the first update, ``--resume`` restores ``recipe.load_state(the checkpoint's parts)``; a fresh run with
``plan.evaluate_first`` is evaluated first (drawn at x = 0 of its curves). After the last, ``recipe.summary()``
becomes summary.json and ``plan.curves`` curves.png. SIGINT, SIGTERM and SIGHUP stop the run between two writes
(``ladder.runtime.signals``), so that ``--resume`` continues it. A notebook's lab runs a recipe the same way, held
in memory (``in_memory``), one ``one_update`` at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ladder.runtime import signals
from ladder.runtime.distributed import Processes
from ladder.runtime.session import RunSession


@dataclass(frozen=True)
class LearningRate:
    """The learning rate of update k = 0, 1, …, from k alone (``--resume`` needs no scheduler state):

        lr_k = lr · min(1, (k + 1) / warmup) · (1 − k / anneal)      (a factor is 1 where its field is 0)
    """

    lr: float
    warmup: int = 0   # a linear warm-up over the first ``warmup`` updates (0: none)
    anneal: int = 0   # a linear decay to 0 over ``anneal`` updates (0: none)

    def __call__(self, k: int) -> float:
        warm = min(1.0, (k + 1) / self.warmup) if self.warmup else 1.0
        cool = 1.0 - k / self.anneal if self.anneal else 1.0
        return self.lr * warm * cool


@dataclass(frozen=True)
class Plan:
    """When things happen in a run: plain data the loop reads; the recipe never sees the loop."""

    updates: int                                 # updates at most (the recipe ends sooner by setting ``done``)
    clock: str = "step"                          # the record's field that counts progress: the curves' x axis,
    #                                              the evaluation cadence, the bar (step: the updates)
    total: int | None = None                     # the bar's total, in the clock's units (None: ``updates``)
    unit: str = "update"                         # the bar's unit
    eval_every: int = 0                          # evaluate when the clock crosses a multiple (0: after the last only)
    evaluate_first: bool = False                 # a fresh run is evaluated before its first update (x = 0)
    learning_rate: LearningRate | None = None    # set on ``recipe.optimizer`` before each update (None: fixed)
    curves: tuple = ()                           # curves.png's ``ladder.plots.Panel``s
    bar: tuple[tuple[str, str, str], ...] = ()   # the bar's postfix: (label, record field, format), last value kept
    checkpoint_last: bool = True                 # checkpoint after the last update too
    evaluations: bool = True                     # False: no evaluation at all (a lab's warm-up)


class Recipe:
    """One rung's algorithm as the loop drives it: ``plan`` and four methods (see the module doc). ``optimizer`` is
    what the plan's learning rate is set on; ``done`` ends the run before ``plan.updates`` (solved, a budget)."""

    plan: Plan
    optimizer: Any = None
    done: bool = False

    def update(self) -> dict:
        """One update: collect → core.Batch → core.update → its statistics (with ``skipped_steps`` and
        ``optimizer_steps`` for the non-finite guard: ``ladder.core.step_counts``)."""
        raise NotImplementedError

    def evaluate(self) -> dict:
        """The evaluation's fields for the record ({}: the recipe has none)."""
        return {}

    def summary(self) -> dict:
        """summary.json (the rung's own files written first)."""
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        """name → what a checkpoint holds: modules, optimisers, generators, plain data."""
        raise NotImplementedError

    def load_state(self, restored: dict[str, Any]) -> None:
        """Take back ``state()``'s parts from a checkpoint: modules, optimisers and generators come back restored in
        place; plain data comes back as saved, for the recipe to keep."""


def train(cfg, rung: str, build: Callable[[Any, RunSession], Recipe], procs: Processes | None = None) -> dict:
    """Open the run directory, ``build`` the recipe inside it, run it to the end; the summary."""
    with signals.stopping(), RunSession(cfg, rung, procs=procs) as session:
        return run(session, build(cfg, session))


def run(session: RunSession, recipe: Recipe) -> dict:
    """Resume (or start), update until the plan or the recipe says done, then write summary.json and curves.png."""
    begin(session, recipe)
    while not finished(session, recipe):
        one_update(session, recipe)
    return session.finish(recipe.summary(), list(recipe.plan.curves), x=recipe.plan.clock)


def finished(session: RunSession, recipe: Recipe) -> bool:
    return recipe.done or session.step >= recipe.plan.updates


def begin(session: RunSession, recipe: Recipe) -> None:
    """Before the first update: with --resume, the recipe's state restored; a fresh run evaluated if the plan says."""
    plan = recipe.plan
    restored = session.resume(recipe.state(), total=plan.updates if plan.total is None else plan.total,
                              unit=plan.unit)
    if restored:
        recipe.load_state(restored)
    elif plan.evaluate_first and plan.evaluations:
        session.before = recipe.evaluate()  # session.step = 0: the evaluation before any update


def in_memory(cfg, rung: str, build: Callable[[Any, RunSession], Recipe], evaluations: bool = True
              ) -> tuple[RunSession, Recipe]:
    """A run held in memory, begun: no directory, no file, no checkpoint (``RunSession(in_memory=True)``). A notebook's
    lab drives it update by update with ``one_update``, reading each record from ``session.records()``.
    ``evaluations=False``: the recipe's evaluations left out, as a lab's warm-up."""
    session = RunSession(cfg, rung, in_memory=True)
    recipe = build(cfg, session)
    if not evaluations:
        recipe.plan = replace(recipe.plan, evaluations=False)
    begin(session, recipe)
    return session, recipe


def one_update(session: RunSession, recipe: Recipe) -> None:
    """Update k = session.step: schedule, update, the guard, evaluation when due, record, checkpoint."""
    plan, k = recipe.plan, session.step
    if plan.learning_rate is not None:
        for group in recipe.optimizer.param_groups:
            group["lr"] = plan.learning_rate(k)
    stats = recipe.update()
    session.guard(stats.get("skipped_steps", 0), stats.pop("optimizer_steps", None))
    session.count_update()  # session.step = k + 1 from here on: the updates done
    before, now = session.clock, stats.get(plan.clock, k + 1)
    last = recipe.done or k + 1 >= plan.updates
    crossed = bool(plan.eval_every) and now // plan.eval_every > before // plan.eval_every
    if plan.evaluations and (crossed or last):
        stats.update(recipe.evaluate())
    session.log(stats, clock=now, bar=plan.bar)
    if plan.checkpoint_last or not last:
        session.checkpoint(**recipe.state())
