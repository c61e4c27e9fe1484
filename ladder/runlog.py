"""What every run leaves behind in its output directory.

    config.json     the options the run started with (``--resume`` reads them back)
    metrics.jsonl   one JSON object per update
    summary.json    final figures, written last: its presence marks a finished run
    curves.png      learning curves
    checkpoint.pt   the latest resumable state (written atomically)
    completions.jsonl  sampled prompts and completions, every --print-samples updates (grpo)
    tb/, wandb/     the tracker's files (``--report-to tensorboard|wandb``: ``ladder.trackers``)
    .lock           held by the process writing the directory: one run at a time

A directory belongs to one run at a time: a second start on it, or a ``--resume`` of a run that is
still going, is refused with one line naming the process that holds it. The lock goes with its
process (``flock``), so the lock of a killed run is simply taken over. When a start fails before
training, only a directory that this process itself created (and locked) is removed again.
"""

from __future__ import annotations

import errno
import json
import math
import os
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from ladder.plots import plot_curves  # noqa: F401 - also read from here


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
    """Every random generator a run draws from: torch's (CPU, and every CUDA device's once CUDA is in
    use), NumPy's and Python's."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


LOCK_NAME = ".lock"


def _cannot_write(what: str, error: OSError) -> str:
    return f"cannot write {what} ({error.strerror or type(error).__name__})"


class DirectoryLock:
    """An exclusive ``flock`` on ``DIR/.lock``, released when its process ends. ``claim`` writes the holder's
    process id into it (once the run really takes the directory), which a refused start then names."""

    def __init__(self, directory: Path):
        self.fd, self.path, self.made_file = None, directory / LOCK_NAME, False
        if sys.platform == "win32":  # no flock: one run per directory is then the user's to keep
            return
        import fcntl

        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            self.made_file = True
        except FileExistsError:
            fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "starting"
            os.close(fd)
            raise UsageError(f"--out {directory} is in use by another run (process {holder}); wait for it to "
                             f"finish, or choose another --out") from None
        self.fd = fd

    def claim(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self, remove_file: bool = False) -> None:
        if self.fd is not None:
            if remove_file:  # a refused start leaves the directory as it found it
                self.path.unlink(missing_ok=True)
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None


class RunLog:
    """The output directory of one run of one rung."""

    def __init__(self, out: str | os.PathLike, rung: str, config: dict, resume: bool = False,
                 overwrite: bool = False, tracker=None, writes: bool = True):
        """``writes=False`` (the other processes of a data-parallel run): keep records in memory, touch no file.
        ``tracker(dir, config, resume)`` opens where each record also goes (``ladder.trackers``)."""
        self.dir = Path(out)
        self.rung = rung
        self.metrics_path = self.dir / "metrics.jsonl"
        self.checkpoint_path = self.dir / "checkpoint.pt"
        self.writes, self.kept = writes, []
        self.completions_path = self.dir / "completions.jsonl"
        self.tracker, self.lock, self.created = None, None, False
        if not writes:
            return
        self._claim()
        try:
            if resume:
                self._check_resumable()
            else:
                self._start_fresh(config, overwrite)
            self.lock.claim()
            if tracker is not None:
                self.tracker = tracker(self.dir, config, resume)
        except OSError as e:
            self.close(discard=True)
            raise UsageError(f"--out {self.dir}: {_cannot_write('there', e)}") from None
        except BaseException:
            self.close(discard=True)
            raise

    def _claim(self) -> None:
        """Create the directory if need be and lock it; remember it as ours only if this call created it."""
        try:
            self.dir.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.dir.mkdir()
                created = True
            except FileExistsError:
                created = False
            self.lock = DirectoryLock(self.dir)
        except OSError as e:
            raise UsageError(f"--out {self.dir}: {_cannot_write('there', e)}") from None
        self.created = created  # only now, holding the lock, is a directory this call made ours to remove

    def _start_fresh(self, config: dict, overwrite: bool) -> None:
        others = [p for p in self.dir.iterdir() if p.name != LOCK_NAME]
        if others:
            if not overwrite:
                finished = (self.dir / "summary.json").exists()
                what = "a finished run" if finished else "files"
                raise UsageError(f"--out {self.dir} already holds {what}; pass --overwrite to replace it "
                                 f"or choose another --out")
            for path in others:  # the lock stays: this run holds it
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        (self.dir / "config.json").write_text(json.dumps(_clean(config), indent=2))
        self.metrics_path.write_text("")

    def close(self, discard: bool = False) -> None:
        """Release the directory. ``discard`` (a start that failed on bad input): remove it too if this
        run created it — never a directory that existed before, nor one another process holds."""
        self._close_tracker()
        if discard and self.created and self.lock is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self.lock is not None:
            self.lock.release(remove_file=discard and self.lock.made_file)
            self.lock = None

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
        try:
            with self.metrics_path.open("a") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as e:
            raise RunStopped(f"{_cannot_write(str(self.metrics_path), e)}; the last checkpoint is kept") from None
        if self.tracker is not None:
            self.tracker.log(record, record.get("step", 0))

    def _close_tracker(self) -> None:
        if self.tracker is not None:
            tracker, self.tracker = self.tracker, None
            tracker.close()

    def log_completions(self, step: int, rows: list[dict]) -> None:
        """Append one update's sampled completions to completions.jsonl, each row stamped with ``step``."""
        if not self.writes:
            return
        try:
            with self.completions_path.open("a") as f:
                f.writelines(json.dumps(_clean({"step": step, **row})) + "\n" for row in rows)
        except OSError as e:
            raise RunStopped(f"{_cannot_write(str(self.completions_path), e)}; the last checkpoint is kept") from None

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
        try:
            torch.save(state, tmp)
            os.replace(tmp, self.checkpoint_path)
        except OSError as e:  # a full disk, say: the previous checkpoint is still whole
            tmp.unlink(missing_ok=True)
            raise RunStopped(f"{_cannot_write(str(self.checkpoint_path), e)}; the last good checkpoint is kept"
                             f"{'' if e.errno != errno.ENOSPC else ' (the disk is full)'}") from None

    def load_checkpoint(self) -> dict | None:
        """The last checkpoint, with metrics.jsonl cut back to what it had seen. None: no checkpoint yet,
        and the run starts again from its first update (metrics.jsonl emptied)."""
        if not self.checkpoint_path.exists():
            if self.writes:
                self.metrics_path.write_text("")
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
            if self.completions_path.exists():  # the completions of updates the checkpoint has not seen go too
                rows = self.completions_path.read_text().splitlines()
                self.completions_path.write_text("".join(line + "\n" for line in rows
                                                         if json.loads(line)["step"] <= state["step"]))
        return state

    def finish(self, summary: dict, curves: dict[str, str], x: str = "step") -> None:
        """Write curves.png, then summary.json (last, so it marks a complete run)."""
        if not self.writes:
            return
        try:
            plot_curves(self.records(), curves, self.dir / "curves.png", x=x, rung=self.rung)
            self._close_tracker()
            (self.dir / "summary.json").write_text(json.dumps(_clean(summary), indent=2))
        except OSError as e:
            raise RunStopped(f"{_cannot_write(str(self.dir), e)}; the last checkpoint is kept") from None


def read_completions(out: str | os.PathLike) -> list[dict]:
    """OUT/completions.jsonl as a list of dicts (step, group, question, completion, reward, rewards,
    advantage, length, truncated); empty if the run wrote none."""
    path = Path(out) / "completions.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]

