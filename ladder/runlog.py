"""What every run leaves behind in its output directory.

    config.json     the options the run started with (``--resume`` reads them back)
    metrics.jsonl   one JSON object per update
    summary.json    final figures, written last: its presence marks a finished run
    curves.png      learning curves
    checkpoint.pt   the latest resumable state (written atomically)
    tb/             TensorBoard event files (``--tensorboard``)
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2, nothing half-written."""


class RunStopped(Exception):
    """Training cannot usefully go on: reported as one line, exit code 1; the run directory is kept."""


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

    def __call__(self, passes: list[dict], steps_per_pass: int) -> float:
        """The number of skipped steps in this update (for the metrics); raises ``RunStopped``."""
        skipped = sum(p["skipped_steps"] for p in passes)
        if skipped and not self.warned:
            self.warned = True
            self.warn(f"warning: a non-finite loss or gradient; {skipped:g} optimiser step(s) skipped "
                      f"(counted in skipped_steps). Lower --lr if it keeps happening.")
        self.in_a_row = self.in_a_row + 1 if skipped >= len(passes) * steps_per_pass else 0
        if self.patience and self.in_a_row >= self.patience:
            raise RunStopped(f"{self.in_a_row} updates in a row had only non-finite losses or gradients, so the "
                             f"weights stopped changing; lower --lr or check the rewards (the run so far is in "
                             f"{self.out})")
        return skipped


def without_timings(record: dict) -> dict:
    """A record without its clock readings (``wall_s`` and the ``time/…`` phases), which differ run to run."""
    return {k: v for k, v in record.items() if k != "wall_s" and not k.startswith("time/")}


def _clean(value):
    """JSON-safe floats: NaN and ±inf become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class RunLog:
    """The output directory of one run of one rung."""

    def __init__(self, out: str | os.PathLike, rung: str, config: dict, resume: bool = False,
                 overwrite: bool = False, tensorboard: bool = False, writes: bool = True):
        """``writes=False`` (the other processes of a data-parallel run): keep records in memory, touch no file."""
        self.dir = Path(out)
        self.rung = rung
        self.metrics_path = self.dir / "metrics.jsonl"
        self.checkpoint_path = self.dir / "checkpoint.pt"
        self.writes, self.kept = writes, []
        self.writer = None
        if not writes:
            return
        if resume:
            self._check_resumable()
        else:
            if self.dir.exists() and any(self.dir.iterdir()):
                if not overwrite:
                    finished = (self.dir / "summary.json").exists()
                    what = "a finished run" if finished else "files"
                    raise UsageError(f"--out {self.dir} already holds {what}; pass --overwrite to replace it "
                                     f"or choose another --out")
                shutil.rmtree(self.dir)
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / "config.json").write_text(json.dumps(_clean(config), indent=2))
            self.metrics_path.write_text("")
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(str(self.dir / "tb"))

    @staticmethod
    def read_config(out: str | os.PathLike) -> dict:
        path = Path(out) / "config.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            raise UsageError(f"--resume {out}: no readable config.json there; is it a ladder run directory?") from None

    def _check_resumable(self) -> None:
        config = self.read_config(self.dir)
        if config.get("rung") != self.rung:
            raise UsageError(f"--resume {self.dir} is a '{config.get('rung')}' run, not '{self.rung}'; "
                             f"resume it with `python -m ladder.run {config.get('rung')} --resume {self.dir}`")
        if (self.dir / "summary.json").exists():
            raise UsageError(f"--resume {self.dir}: that run already finished (summary.json exists)")

    def log(self, record: dict) -> None:
        record = _clean(record)
        if not self.writes:
            self.kept.append(record)
            return
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            step = record.get("step", 0)
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step":
                    self.writer.add_scalar(key, value, step)

    def records(self) -> list[dict]:
        if not self.writes:
            return list(self.kept)
        lines = self.metrics_path.read_text().splitlines() if self.metrics_path.exists() else []
        return [json.loads(line) for line in lines if line.strip()]

    def save_checkpoint(self, state: dict) -> None:
        """Atomic: write to a temporary name, then rename over the previous checkpoint."""
        if not self.writes:
            return
        state = dict(state, rung=self.rung, metrics_lines=len(self.records()))
        tmp = self.checkpoint_path.with_suffix(".pt.tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.checkpoint_path)

    def load_checkpoint(self) -> dict | None:
        """The last checkpoint, with metrics.jsonl cut back to what it had seen (None: no checkpoint)."""
        if not self.checkpoint_path.exists():
            return None
        try:
            state = torch.load(self.checkpoint_path, weights_only=False)
        except Exception as e:  # noqa: BLE001 - any unreadable file is the same user-facing problem
            raise UsageError(f"--resume {self.dir}: checkpoint.pt is corrupt or partial ({type(e).__name__}); "
                             f"start again without --resume") from None
        if not isinstance(state, dict) or state.get("rung") != self.rung or "metrics_lines" not in state:
            raise UsageError(f"--resume {self.dir}: checkpoint.pt is not a '{self.rung}' checkpoint")
        if self.writes:
            kept = self.metrics_path.read_text().splitlines()[: state["metrics_lines"]]
            self.metrics_path.write_text("".join(line + "\n" for line in kept))
        return state

    def finish(self, summary: dict, curves: dict[str, str], x: str = "step") -> None:
        """Write curves.png, then summary.json (last, so it marks a complete run)."""
        if not self.writes:
            return
        plot_curves(self.records(), curves, self.dir / "curves.png", x=x)
        if self.writer is not None:
            self.writer.close()
        (self.dir / "summary.json").write_text(json.dumps(_clean(summary), indent=2))


def plot_curves(records: list[dict], curves: dict[str, str], path: Path, x: str = "step") -> None:
    """One panel per metric key (``curves`` maps key → panel title), against ``x``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(curves)
    cols = min(3, len(keys))
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.2 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        points = [(r[x], r[key]) for r in records if r.get(key) is not None and x in r]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="." if len(xs) < 50 else None)
        ax.set_title(curves[key])
        ax.set_xlabel(x)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    # Fixed margins (in inches, so any number of rows looks alike): tight_layout would render the figure twice.
    height = 3.2 * rows
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.5 / height, top=1 - 0.35 / height, wspace=0.28, hspace=0.5)
    fig.savefig(path, dpi=90)
    plt.close(fig)
