"""What every run leaves behind in its output directory.

    config.json     the options the run started with (``--resume`` reads them back)
    metrics.jsonl   one JSON object per update
    summary.json    final figures, written last: its presence marks a finished run
    curves.png      learning curves
    checkpoint.pt   the latest resumable state (written atomically)
    completions.jsonl  sampled prompts and completions, every --print-samples updates (grpo; eval)
    policy.pt, model/, adapter/, policy/, samples.md   the trained weights (and ppo-sentiment's samples)
    tb/, wandb/     the tracker's files (``--report-to tensorboard|wandb``: ``ladder.trackers``)
    .lock           held by the process writing the directory: one run at a time

A directory belongs to one run at a time: a second start on it, or a ``--resume`` of a run that is still
going, is refused with one line naming the process that holds it. The lock goes with its process
(``flock``), so the lock of a killed run is simply taken over. A fresh start takes a new or empty directory,
or, with ``--overwrite``, a run of the same rung: the files above (nothing else) are set aside in .replaced
until training starts (``started``), and put back if it never does.
Every file is written whole or not at all (a failed append is cut back, the others renamed into place).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shlex
import shutil
import sys
from pathlib import Path

import torch

from ladder.plots import plot_curves  # noqa: F401 - also read from here
from ladder.seeding import rng_state, seed_everything, set_rng_state  # noqa: F401 - also read from here


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2, nothing half-written."""


class RunStopped(Exception):
    """Training cannot usefully go on: reported as one line, exit code 1; the run directory is kept."""


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


LOCK_NAME = ".lock"
REPLACED = ".replaced"  # the run --overwrite replaces, set aside until the new one starts training
RUN_FILES = ("config.json", "metrics.jsonl", "summary.json", "curves.png", "checkpoint.pt", "checkpoint.pt.tmp",
             "completions.jsonl", "policy.pt", "model", "adapter", "policy", "samples.md", "tb", "wandb", REPLACED)


def _cannot_write(what: str, error: OSError) -> str:
    return f"cannot write {what} ({error.strerror or type(error).__name__})"


class _Recorded:
    """A file that remembers the OSError of a failed write: torch.save reports a full disk as a RuntimeError."""

    def __init__(self, file):
        self.file, self.error = file, None

    def write(self, data) -> int:
        try:
            return self.file.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.file.flush()


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
                 overwrite: bool = False, tracker=None, writes: bool = True, trains: bool = True):
        """``writes=False`` (the other processes of a data-parallel run): keep records in memory, touch no file.
        ``tracker(dir, config, resume)`` opens where each record also goes (``ladder.trackers``).
        ``trains=False`` (eval): no metrics.jsonl, no checkpoint, nothing to resume."""
        self.dir, self.rung = Path(out), rung
        self.metrics_path, self.completions_path = self.dir / "metrics.jsonl", self.dir / "completions.jsonl"
        self.checkpoint_path = self.dir / "checkpoint.pt"
        self.writes, self.trains, self.kept = writes, trains, []
        self.tracker, self.lock, self.created, self.replaced = None, None, False, None
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
            self._check_replaceable(overwrite)
            shutil.rmtree(self.dir / REPLACED, ignore_errors=True)  # left by a start that was killed
            self.replaced = self.dir / REPLACED
            self.replaced.mkdir()
            for path in others:  # what a run writes, and nothing else; the lock stays: this run holds it
                if path.name in RUN_FILES and path.name != REPLACED:
                    os.replace(path, self.replaced / path.name)
        (self.dir / "config.json").write_text(json.dumps(_clean(config), indent=2))
        if self.trains:
            self.metrics_path.write_text("")

    def _check_replaceable(self, overwrite: bool) -> None:
        """A directory with files may be replaced only with ``--overwrite`` and only if it holds this rung's run."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            rung = None
            rung = json.loads((self.dir / "config.json").read_text()).get("rung")
        if rung is None:
            raise UsageError(f"--out {self.dir} holds files that are not a ladder run's; choose another --out "
                             f"(--overwrite replaces only a run directory)")
        if rung != self.rung:
            raise UsageError(f"--out {self.dir} holds a '{rung}' run; choose another --out (a run never writes "
                             f"into another rung's directory)")
        if not overwrite:
            if (self.dir / "summary.json").exists() or not self.trains:
                raise UsageError(f"--out {self.dir} already holds a finished run; pass --overwrite to replace it "
                                 f"or choose another --out")
            raise UsageError(f"--out {self.dir} already holds an unfinished run; continue it with --resume "
                             f"{shlex.quote(str(self.dir))}, pass --overwrite to replace it, or choose another --out")

    def close(self, discard: bool = False) -> None:
        """Release the directory. ``discard`` (nothing of value written): remove it too if this run created it —
        never a directory that existed before, nor one another process holds."""
        self._close_tracker()
        if discard and self.created and self.lock is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self.replaced is not None and self.lock is not None:  # it never trained: the replaced run comes back
            for path in self.dir.iterdir():
                if path.name in RUN_FILES and path != self.replaced:
                    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
            for path in self.replaced.iterdir():
                os.replace(path, self.dir / path.name)
            self.replaced.rmdir()
            self.replaced = None
        if self.lock is not None:
            self.lock.release(remove_file=discard and self.lock.made_file)
            self.lock = None

    def started(self) -> None:
        """Training has begun (or eval has written its results): the run that --overwrite replaced goes for good."""
        if self.replaced is not None:
            shutil.rmtree(self.replaced, ignore_errors=True)
            self.replaced = None

    def continue_with(self) -> str:
        """The command that resumes this run, ready to paste."""
        return f"continue with: python -m ladder.run {self.rung} --resume {shlex.quote(str(self.dir))}"

    def _write_failed(self, path: Path, error: OSError) -> RunStopped:
        """A write that failed during the run (a full disk, say): one line, and how to go on."""
        if not self.trains:  # eval: nothing to keep, nothing to continue
            return RunStopped(_cannot_write(str(path), error))
        kept = "the last good checkpoint is kept" if self.checkpoint_path.exists() else "no checkpoint was saved yet"
        full = " (the disk is full)" if error.errno == errno.ENOSPC else ""
        return RunStopped(f"{_cannot_write(str(path), error)}; {kept}{full}; {self.continue_with()}")

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

    def _append(self, path: Path, lines: list[str]) -> None:
        """Whole lines at the end of ``path``; a write that fails leaves the file as it was."""
        size = path.stat().st_size if path.exists() else 0
        try:
            with path.open("a") as f:
                f.writelines(lines)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.truncate(path, size)
            raise self._write_failed(path, e) from None

    def log(self, record: dict) -> None:
        record = _clean(record)
        if not self.writes:
            self.kept.append(record)
            return
        self._append(self.metrics_path, [json.dumps(record) + "\n"])
        if self.tracker is not None:
            self.tracker.log(record, record.get("step", 0))

    def _close_tracker(self) -> None:
        if self.tracker is not None:
            tracker, self.tracker = self.tracker, None
            tracker.close()

    def log_completions(self, step: int, rows: list[dict]) -> None:
        """Append one update's sampled completions to completions.jsonl, each row stamped with ``step``."""
        if self.writes:
            self._append(self.completions_path, [json.dumps(_clean({"step": step, **row})) + "\n" for row in rows])

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
            with tmp.open("wb") as f:
                torch.save(state, recorded := _Recorded(f))
            os.replace(tmp, self.checkpoint_path)
        except (OSError, RuntimeError) as e:  # a full disk, say: the previous checkpoint is still whole
            tmp.unlink(missing_ok=True)
            if isinstance(e, RuntimeError) and recorded.error is None:
                raise  # torch's own failure, not the disk's
            raise self._write_failed(self.checkpoint_path, e if isinstance(e, OSError) else recorded.error) from None
        except BaseException:  # Ctrl-C while saving: no half-written file stays behind
            tmp.unlink(missing_ok=True)
            raise

    def load_checkpoint(self) -> dict | None:
        """The last checkpoint, with metrics.jsonl (and completions.jsonl) cut back to what it had seen. None:
        no checkpoint yet, and the run starts again from its first update (both files emptied)."""
        if not self.checkpoint_path.exists():
            if self.writes:
                self.metrics_path.write_text("")
                self.completions_path.unlink(missing_ok=True)
            return None
        try:
            state = torch.load(self.checkpoint_path, weights_only=False)
        except Exception as e:  # noqa: BLE001 - any unreadable file is the same user-facing problem
            raise UsageError(f"--resume {self.dir}: checkpoint.pt is corrupt or partial ({type(e).__name__}); "
                             f"start again without --resume") from None
        if not isinstance(state, dict) or state.get("rung") != self.rung or "metrics_lines" not in state:
            raise UsageError(f"--resume {self.dir}: checkpoint.pt is not a '{self.rung}' checkpoint")
        if self.writes:
            self._cut_back(state)
        return state

    def _cut_back(self, state: dict) -> None:
        """metrics.jsonl and completions.jsonl as they were at the checkpoint (a torn last line dropped)."""
        need, there = state["metrics_lines"], self.metrics_path.exists()
        kept = _whole_lines(self.metrics_path, self.dir)[:need] if there else []
        if len(kept) < need:
            what = f"has {len(kept)} line{'' if len(kept) == 1 else 's'}" if there else "is missing"
            raise UsageError(f"--resume {self.dir}: metrics.jsonl {what}, the checkpoint needs its first "
                             f"{'line' if need == 1 else f'{need} lines'}; "
                             f"put it back, or start again with --overwrite")
        self.metrics_path.write_text("".join(line + "\n" for line in kept))
        if self.completions_path.exists():  # the completions of updates the checkpoint has not seen go too
            rows = _whole_lines(self.completions_path, self.dir)
            self.completions_path.write_text("".join(line + "\n" for line in rows
                                                     if json.loads(line)["step"] <= state["step"]))

    def write_file(self, name: str, text: str) -> None:
        """DIR/name whole or not at all: written beside it, then renamed into place."""
        path, tmp = self.dir / name, self.dir / f".{name}.tmp"
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise self._write_failed(path, e) from None

    def finish(self, summary: dict, curves, x: str = "step") -> None:
        """Write curves.png (``curves``: ``ladder.plots.plot_curves``'s), then summary.json (last, so it marks a
        complete run)."""
        if not self.writes:
            return
        tmp = self.dir / ".curves.tmp.png"  # the suffix tells matplotlib the format
        try:
            plot_curves(self.records(), curves, tmp, x=x, rung=self.rung)
            os.replace(tmp, self.dir / "curves.png")
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise self._write_failed(self.dir / "curves.png", e) from None
        self._close_tracker()
        self.write_file("summary.json", json.dumps(_clean(summary), indent=2))


def _whole_lines(path: Path, run_dir: Path) -> list[str]:
    """The JSON lines of ``path``: a torn last one (a write cut short) is left out, a broken one elsewhere refused."""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    for i, line in enumerate(lines):
        try:
            json.loads(line)
        except ValueError:
            if i == len(lines) - 1:
                return lines[:-1]
            raise UsageError(f"--resume {run_dir}: line {i + 1} of {path.name} is not JSON; repair it, or start "
                             f"again with --overwrite") from None
    return lines


def read_completions(out: str | os.PathLike) -> list[dict]:
    """OUT/completions.jsonl as a list of dicts (step, group, question, completion, reward, rewards,
    advantage, length, truncated); empty if the run wrote none."""
    path = Path(out) / "completions.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]

