"""One run of a rung, from its start to its summary: the scaffolding every rung shares.

    with RunSession(cfg, NAME, config, total=cfg.steps, procs=procs) as run:
        saved = run.resume(policy=policy, optimizer=optimizer)      # {} on a fresh start
        while run.step < cfg.steps:
            ... collect → Batch → core.update → record ...
            run.log(record)                                          # step, wall clock, bar, metrics
            run.checkpoint(policy=policy, optimizer=optimizer, progress={...})
        run.finish(summary, CURVES)

It holds the run directory (``RunLog``, as ``files``: config, metrics, the lock), the non-finite guard, the
progress bar, the process check of a resume, and checkpoints of named parts in one layout for every
rung:

    {"rung", "step", "wall_s", "bar", "processes",
     "rng":   [every process's generators: torch CPU and CUDA, NumPy, Python],
     "parts": {name: saved state of each part},
     "metrics_lines"}

A part is a ``torch.nn.Module`` (its trainable parameters), anything with ``state_dict`` /
``load_state_dict`` (an optimiser, a KL controller), a ``torch.Generator``, a ``random.Random``,
or plain data (counters, lists), restored as it was saved.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

import torch
from tqdm.auto import tqdm

from ladder.cli import show_progress
from ladder.distributed import Processes
from ladder.runlog import NonFiniteGuard, RunLog, UsageError, rng_state, set_rng_state
from ladder.trackers import tracker


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

    def __init__(self, cfg, rung: str, config: dict, total: int, unit: str = "update",
                 procs: Processes | None = None):
        self.cfg, self.rung = cfg, rung
        self.procs = procs or Processes(torch.device("cpu"))
        self.files = RunLog(cfg.out, rung, {"rung": rung, **config, "processes": self.procs.world},
                          resume=cfg.resume is not None, overwrite=cfg.overwrite, tracker=tracker(cfg.report_to),
                          writes=self.procs.is_main)
        self.dir = self.files.dir
        self.guard = NonFiniteGuard(cfg.max_nonfinite_updates, self.dir, warn=tqdm.write)
        self.total, self.unit = total, unit
        self.step, self.started = 0, time.perf_counter()
        self.bar = None

    def __enter__(self) -> RunSession:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if self.bar is not None:
            self.bar.close()
        # Bad input found before or during the run: nothing half-written is left in a directory it created.
        self.files.close(discard=kind is not None and issubclass(kind, UsageError))

    def resume(self, **parts) -> dict:
        """With ``--resume``: load the last checkpoint into ``parts`` (name → part), restore this process's
        random generators, and return ``{name: restored part or saved value}``; ``{}`` when starting fresh.
        Starts the progress bar either way."""
        state = self.files.load_checkpoint() if self.cfg.resume else None
        restored = {}
        if state is not None:
            if state["processes"] != self.procs.world:
                raise UsageError(f"--resume {self.dir}: the run was saved by {state['processes']} process(es), "
                                 f"this is {self.procs.world}; resume it with the same number")
            restored = {name: load_part(part, state["parts"][name]) for name, part in parts.items()}
            set_rng_state(state["rng"][self.procs.rank])
            self.step, self.started = state["step"], time.perf_counter() - state["wall_s"]
        self.bar = tqdm(total=self.total, initial=state["bar"] if state else 0, unit=self.unit, desc=self.rung,
                        disable=not show_progress(self.cfg.progress and self.procs.is_main))
        return restored

    def seed_each_process(self) -> None:
        """With several processes, a generator of its own for each (seed + 1 + rank): the weights built so far
        are equal everywhere, the completions each process samples from now on differ. Alone: unchanged."""
        if self.procs.world > 1:
            torch.manual_seed(self.cfg.seed + 1 + self.procs.rank)

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self.started

    def skipped_steps(self, passes: list[dict], steps_per_pass: int) -> float:
        """The update's skipped optimiser steps (stops the run after too many in a row: ``NonFiniteGuard``)."""
        return self.guard(passes, steps_per_pass)

    def log(self, record: dict, advance: int = 1, **postfix) -> None:
        """Count the update, stamp ``step`` and ``wall_s`` on its record, write it, move the bar."""
        self.step += 1
        record = {"step": self.step, **record, "wall_s": self.wall_s}
        self.files.log(record)
        self.bar.update(advance)
        if postfix:
            self.bar.set_postfix(**postfix)

    def log_completions(self, rows: list[dict]) -> None:
        """This update's sampled completions, to OUT/completions.jsonl (``RunLog.log_completions``)."""
        self.files.log_completions(self.step, rows)

    def write(self, text: str, stderr: bool = False) -> None:
        """Print above the progress bar (main process only), on stdout or, for a warning, on stderr."""
        if self.procs.is_main:
            tqdm.write(text, file=sys.stderr if stderr else None)

    def checkpoint(self, force: bool = False, **parts) -> None:
        """Every ``--checkpoint-every`` updates (or now, with ``force``): save ``parts`` and every process's
        random generators, atomically."""
        if not force and self.step % self.cfg.checkpoint_every:
            return
        rng = self.procs.gather_object(rng_state())  # every process's generators, for an exact resume
        self.files.save_checkpoint({"step": self.step, "wall_s": self.wall_s, "bar": self.bar.n,
                                  "processes": self.procs.world, "rng": rng,
                                  "parts": {name: part_state(part) for name, part in parts.items()}})

    def records(self) -> list[dict]:
        return self.files.records()

    def finish(self, summary: dict, curves: list, x: str = "step") -> dict:
        """Write curves.png (``curves``: its ``ladder.plots.Panel``s) and summary.json (last: it marks a finished
        run); returns the summary."""
        self.bar.close()
        self.files.finish(summary, curves, x=x)
        return summary
