"""One run of a rung, from its start to its summary: the scaffolding every rung shares, driven by
``ladder.runtime.loop`` (which says when each of these happens):

    with RunSession(cfg, NAME, procs=procs) as run:                   # config.json: cfg.options()
        restored = run.resume({"policy": policy, ...}, total=updates)  # {} on a fresh start
        while run.step < updates:
            stats = ... collect → Batch → core.update ...
            run.guard(stats["skipped_steps"], stats["optimizer_steps"])
            run.count_update()                                         # run.step: the updates done
            run.log(stats)                                             # step, wall clock, bar, metrics
            run.checkpoint(policy=policy, ...)
        run.finish(summary, CURVES)

``in_memory=True`` holds a run without a directory (a notebook's lab drives one): records kept in memory, no file
written, no checkpoint.

It holds the run directory (``RunLog``, as ``files``: config, metrics, the lock), the non-finite guard, the
progress bar, the process check of a resume, and checkpoints of named parts in one layout for every
rung:

    {"rung", "step", "wall_s", "bar", "clock", "before", "processes",
     "rng":   [every process's generators: torch CPU and CUDA, NumPy, Python],
     "parts": {name: saved state of each part},
     "metrics_lines"}

(``clock``: the run's clock after the last update; ``before``: the evaluation before the first update.) It is saved
atomically, its sha256 beside it in checkpoint.pt.sha256 (``RunLog.save_checkpoint``). A part is a
``torch.nn.Module`` (its trainable parameters), anything with ``state_dict`` / ``load_state_dict`` (an optimiser,
a KL controller), a ``torch.Generator``, a ``random.Random``, or plain data (counters, lists), restored as it
was saved.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from typing import Any

import torch
from tqdm.auto import tqdm

from ladder.runtime.distributed import Processes
from ladder.runtime.runlog import RunLog, RunStopped, UsageError, rng_state, set_rng_state
from ladder.runtime.terminal import show_progress
from ladder.runtime.trackers import tracker


class NonFiniteGuard:
    """Watches the skipped optimiser steps of each update.

    ``core.update`` never lets a non-finite loss or gradient reach the weights: it skips that step and
    counts it. This warns the first time it happens and stops the run once ``patience`` updates in a
    row had every step skipped (the weights have stopped moving: lower the learning rate or check the
    rewards).
    """

    def __init__(self, patience: int, out: str | os.PathLike, warn=print):
        self.patience, self.out, self.warn = patience, out, warn
        self.warned, self.in_a_row = False, 0

    def __call__(self, skipped: float, steps: int | None) -> None:
        """``skipped`` of the update's ``steps`` optimiser steps were skipped (None: an update without an optimiser
        step); raises ``RunStopped``."""
        if steps is None:
            return
        if skipped and not self.warned:
            self.warned = True
            self.warn(f"warning: a non-finite loss or gradient; {skipped:g} optimiser step(s) skipped "
                      f"(counted in skipped_steps). Lower --lr if it keeps happening.")
        self.in_a_row = self.in_a_row + 1 if skipped >= steps else 0
        if self.patience and self.in_a_row >= self.patience:
            raise RunStopped(f"{self.in_a_row} updates in a row had only non-finite losses or gradients, so the "
                             f"weights stopped changing; lower --lr or check the rewards (the run so far is in "
                             f"{self.out})")


def part_state(part) -> Any:
    """What a checkpoint keeps of one part."""
    if isinstance(part, torch.nn.Module):
        return {n: p.detach().clone() for n, p in part.named_parameters() if p.requires_grad}
    if isinstance(part, torch.Generator):
        return part.get_state()
    if isinstance(part, random.Random):
        return part.getstate()
    if hasattr(part, "state_dict"):
        return part.state_dict()
    return part


def misfit(module: torch.nn.Module, state: dict) -> str | None:
    """How a checkpoint's tensors differ from the trainable parameters of the model built now; None: they fit."""
    shapes = {n: list(p.shape) for n, p in module.named_parameters() if p.requires_grad}
    for name in sorted(set(shapes) | set(state)):
        saved, built = (list(state[name].shape) if name in state else None), shapes.get(name)
        if saved != built:
            return f"{name} is {'absent' if saved is None else saved} there, {'absent' if built is None else built} " \
                   f"in the model config.json builds"
    return None


def load_part(part, state) -> Any:
    """Put ``state`` back into ``part``; returns the part (plain data: the saved value itself)."""
    if isinstance(part, torch.nn.Module):
        part.load_state_dict(state, strict=False)  # the trainable parameters; frozen weights come from loading
    elif isinstance(part, torch.Generator):
        part.set_state(state)
    elif isinstance(part, random.Random):
        part.setstate(state)
    elif hasattr(part, "load_state_dict"):
        part.load_state_dict(state)
    else:
        return state
    return part


class RunSession:
    """The run directory, the guard, the progress bar and checkpoints of one run (see the module doc)."""

    def __init__(self, cfg, rung: str, procs: Processes | None = None, in_memory: bool = False):
        """``cfg`` names its options and their values itself (``cfg.options()``: config.json)."""
        self.cfg, self.rung, self.in_memory = cfg, rung, in_memory
        self.procs = procs or Processes(torch.device("cpu"))
        config = {} if in_memory else cfg.options()
        self.files = RunLog(cfg.out or os.curdir, rung, {"rung": rung, **config, "processes": self.procs.world},
                            resume=cfg.resume is not None, overwrite=cfg.overwrite,
                            tracker=None if in_memory else tracker(cfg.report_to),
                            writes=self.procs.is_main and not in_memory)
        self.dir = self.files.dir
        self.guard = NonFiniteGuard(cfg.max_nonfinite_updates, self.dir, warn=tqdm.write)
        self.step, self.clock, self.started = 0, 0, time.perf_counter()  # step: the updates done; clock: the run's
        self.before: dict = {}  # the evaluation before the first update (drawn at x = 0 of the curves)
        self.bar, self.training = None, False  # training: resume() has run, the updates are under way
        self.shown: dict[str, str] = {}  # the bar's postfix

    def __enter__(self) -> RunSession:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if self.bar is not None:
            self.bar.close()
        bad_input = kind is not None and issubclass(kind, UsageError)
        # A checkpoint is what a run has of value: with one, bad input met during the run (a reward function
        # that fails at update 3) stops the run and keeps it; without, the run is undone as if never started.
        kept = bad_input and self.training and self.files.checkpoint_path.exists()
        self.files.close(discard=bad_input and not kept)  # removes only a directory this run created
        if kept:
            raise RunStopped(f"{error}; the run so far is kept, {self.files.continue_with()}") from None
        if kind is not None and issubclass(kind, Exception) and not bad_input and (gone := self.files.removed()):
            raise gone from None  # whatever failed next (a rung's own write, say): the directory is not there
        if kind is not None and issubclass(kind, Exception) and not issubclass(kind, RunStopped) and self._disk_full():
            # A rung's own write (its final weights, say) on a full disk: torch.save and safetensors report it
            # in errors of their own, so the disk itself is asked.
            kept = "the last good checkpoint is kept" if self.files.checkpoint_path.exists() else "no checkpoint yet"
            raise RunStopped(f"a write into {self.dir} failed ({kind.__name__}): the disk is full; {kept}; "
                             f"{self.files.continue_with()}") from None

    def _disk_full(self) -> bool:
        try:
            return shutil.disk_usage(self.dir).free == 0
        except OSError:
            return False

    def resume(self, parts: dict | None = None, total: int = 0, unit: str = "update") -> dict:
        """With ``--resume``: load the last checkpoint into ``parts`` (name → part), restore this process's
        random generators, and return ``{name: restored part or saved value}``; ``{}`` when starting fresh.
        Starts the progress bar (``total`` ``unit``s) either way."""
        parts = parts or {}
        state = self.files.load_checkpoint() if self.cfg.resume else None
        restored = {}
        if state is not None:
            if state["processes"] != self.procs.world:
                raise UsageError(f"--resume {self.dir}: the run was saved by {state['processes']} process(es), "
                                 f"this is {self.procs.world}; resume it with the same number")
            restored = {name: self._restore(name, part, state["parts"]) for name, part in parts.items()}
            set_rng_state(state["rng"][self.procs.rank])
            self.step, self.started = state["step"], time.perf_counter() - state["wall_s"]
            self.clock, self.before = state.get("clock", self.step), state.get("before", {})
        self.training = True
        self.files.started()  # from here on, the run --overwrite replaced is gone for good
        self.bar = tqdm(total=total, initial=state["bar"] if state else 0, unit=unit, desc=self.rung,
                        disable=not show_progress(self.cfg.progress and self.procs.is_main))
        return restored

    def _restore(self, name: str, part, saved: dict):
        """One part from the checkpoint; a checkpoint of another run (other shapes, other parts) is one line."""
        where = f"--resume {self.dir}: checkpoint.pt does not belong to this run"
        if name not in saved:
            raise UsageError(f"{where} (it has no '{name}')")
        if isinstance(part, torch.nn.Module) and (problem := misfit(part, saved[name])):
            raise UsageError(f"{where}: {problem}")
        try:
            return load_part(part, saved[name])
        except (ValueError, RuntimeError, TypeError, KeyError) as e:
            raise UsageError(f"{where}: its '{name}' does not fit ({type(e).__name__})") from None

    def seed_each_process(self) -> None:
        """With several processes, a generator of its own for each (seed + 1 + rank): the weights built so far
        are equal everywhere, the completions each process samples from now on differ. Alone: unchanged."""
        if self.procs.world > 1:
            torch.manual_seed(self.cfg.seed + 1 + self.procs.rank)

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self.started

    def count_update(self) -> None:
        """One more update done (``step``)."""
        self.step += 1

    def log(self, record: dict, clock: int | None = None, bar: tuple = ()) -> None:
        """Stamp ``step`` and ``wall_s`` on the update's record, write it, move the bar to ``clock`` (the run's
        clock after it; None: the updates done) with ``bar``'s postfix: (label, field, format), each field's
        last value kept."""
        record = {"step": self.step, **record, "wall_s": self.wall_s}
        self.files.log(record)
        clock = self.step if clock is None else clock
        self.bar.update(clock - self.clock)
        self.clock = clock
        self.shown.update({label: format(record[field], spec) for label, field, spec in bar
                           if record.get(field) is not None})
        if self.shown:
            self.bar.set_postfix(**self.shown)

    def log_completions(self, step: int, rows: list[dict]) -> None:
        """Update ``step``'s sampled completions, to OUT/completions.jsonl (``RunLog.log_completions``)."""
        self.files.log_completions(step, rows)

    def write(self, text: str, stderr: bool = False) -> None:
        """Print above the progress bar (main process only; nothing in memory), on stdout or, for a warning, on
        stderr."""
        if self.procs.is_main and not self.in_memory:
            tqdm.write(text, file=sys.stderr if stderr else None)

    def checkpoint(self, force: bool = False, **parts) -> None:
        """Every ``--checkpoint-every`` updates (or now, with ``force``): save ``parts`` and every process's
        random generators, atomically."""
        if self.in_memory or (not force and self.step % self.cfg.checkpoint_every):
            return
        rng = self.procs.gather_object(rng_state())  # every process's generators, for an exact resume
        self.files.save_checkpoint({"step": self.step, "wall_s": self.wall_s, "bar": self.bar.n,
                                    "clock": self.clock, "before": self.before,
                                  "processes": self.procs.world, "rng": rng,
                                  "parts": {name: part_state(part) for name, part in parts.items()}})

    def records(self) -> list[dict]:
        return self.files.records()

    def finish(self, summary: dict, curves: list, x: str = "step") -> dict:
        """Write curves.png (``curves``: its ``ladder.plots.Panel``s, the evaluation before the first update drawn at
        x = 0) and summary.json (last: it marks a finished run); returns the summary."""
        self.bar.close()
        self.files.finish(summary, [panel.starting_at(**self.before) for panel in curves], x=x)
        return summary
