"""What every run leaves behind in its output directory.

    config.json     the options the run started with (``--resume`` reads them back)
    metrics.jsonl   one JSON object per update
    summary.json    final figures, written last: its presence marks a finished run
    curves.png      learning curves
    checkpoint.pt   the latest resumable state
    checkpoint.pt.sha256  its sha256, as ``sha256sum`` writes it: ``--resume`` refuses a checkpoint damaged since
    completions.jsonl  sampled prompts and completions, every --print-samples updates (grpo; eval)
    policy.pt, model/, adapter/, policy/, samples.md   the trained weights (and ppo-sentiment's samples)
    tb/, wandb/     the tracker's files (``--report-to tensorboard|wandb``: ``ladder.runtime.trackers``)
    .lock           held by the process writing the directory: one run at a time
    .replacing, .replaced   the run an ``--overwrite`` start sets aside (below)

A directory belongs to one run at a time (``ladder.runtime.run_lock``): a second start on it, or a ``--resume`` of a run
that is still going, is refused with one line naming the process that holds it. A fresh start takes a new or empty
directory, or, with ``--overwrite``, a run of the same rung: the files above (nothing else) are set aside in
.replacing, then .replaced, and kept until training starts (``started``); if it never does they are put back, by
this process or, when it was killed, by the next command on the directory before anything else
(``ladder.runtime.replaced_run``).

Every file is written whole or not at all, so that a process killed at any moment (SIGKILL included) leaves
each file as it was or as it was meant to be: a rewrite (config.json, the cut back of metrics.jsonl and
completions.jsonl on ``--resume``, summary.json) goes through ``ladder.runtime.whole_files``, and a checkpoint
through ``ladder.runtime.checkpoint_file`` (which also checks its sum on load); an append that fails is cut back to
where it began, and a torn last line (an append a kill cut short) is dropped on ``--resume``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shlex
import shutil
from pathlib import Path

from ladder.plots import plot_curves  # noqa: F401 - also read from here
from ladder.runtime import replaced_run
from ladder.runtime.checkpoint_file import CHECKSUMS, TEMPORARY, CheckpointFile, CorruptCheckpoint
from ladder.runtime.errors import RunStopped, UsageError  # noqa: F401 - also read from here
from ladder.runtime.run_lock import LOCK_NAME, DirectoryInUse, DirectoryLock
from ladder.runtime.seeding import rng_state, seed_everything, set_rng_state  # noqa: F401 - also read from here
from ladder.runtime.whole_files import temporary, write_whole


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


_KEEP_THE_RUN = "put back an intact copy to resume it, or start a new run with another --out"  # a bad checkpoint
RUN_FILES = ("config.json", "metrics.jsonl", "summary.json", "curves.png", "checkpoint.pt", TEMPORARY,
             CHECKSUMS, "completions.jsonl", "policy.pt", "model", "adapter", "policy", "reward_model", "samples.md",
             "tb", "wandb")
# What a killed process may leave half-written: removed by the next process that takes the directory.
LEFTOVERS = (*(temporary(name) for name in RUN_FILES), TEMPORARY, ".curves.tmp.png")


def _cannot_write(what: str, error: OSError) -> str:
    return f"cannot write {what} ({error.strerror or type(error).__name__})"


class RunLog:
    """The output directory of one run of one rung."""

    def __init__(self, out: str | os.PathLike, rung: str, config: dict, resume: bool = False,
                 overwrite: bool = False, tracker=None, writes: bool = True, trains: bool = True):
        """``writes=False`` (the other processes of a data-parallel run): keep records in memory, touch no file.
        ``tracker(dir, config, resume)`` opens where each record also goes (``ladder.runtime.trackers``).
        ``trains=False`` (eval): no metrics.jsonl, no checkpoint, nothing to resume."""
        self.dir, self.rung = Path(out), rung
        self.metrics_path, self.completions_path = self.dir / "metrics.jsonl", self.dir / "completions.jsonl"
        self.checkpoint_file = CheckpointFile(self.dir)
        self.checkpoint_path, self.checksums_path = self.checkpoint_file.path, self.checkpoint_file.sums_path
        self.writes, self.trains, self.kept = writes, trains, []
        self.tracker, self.lock, self.created, self.replaced = None, None, False, None
        if not writes:
            return
        self._claim()
        try:
            self._recover()
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
        except DirectoryInUse as e:
            raise UsageError(f"--out {self.dir} is in use by another run (process {e.holder}); wait for it to "
                             f"finish, or choose another --out") from None
        except OSError as e:
            raise UsageError(f"--out {self.dir}: {_cannot_write('there', e)}") from None
        self.created = created  # only now, holding the lock, is a directory this call made ours to remove

    def _recover(self) -> None:
        """First thing on a directory this process holds: what a killed process left half done is finished or
        undone. Its temporary files go, the run an interrupted --overwrite start set aside comes back (never lost),
        and a replaced run whose removal was cut short goes (the run that replaced it had started training)."""
        for name in LEFTOVERS:
            (self.dir / name).unlink(missing_ok=True)
        replaced_run.clear_discarded(self.dir)
        self._put_back()

    def _start_fresh(self, config: dict, overwrite: bool) -> None:
        others = [p for p in self.dir.iterdir() if p.name != LOCK_NAME]
        if others:
            self._check_replaceable(overwrite)
            self.replaced = replaced_run.set_aside(self.dir, others, RUN_FILES)
        write_whole(self.dir / "config.json", json.dumps(_clean(config), indent=2).encode())
        if self.trains:
            write_whole(self.metrics_path, b"")

    def _put_back(self) -> None:
        """The run an --overwrite start set aside, back in the directory as it was (``ladder.runtime.replaced_run``)."""
        replaced_run.put_back(self.dir, RUN_FILES, LEFTOVERS)
        self.replaced = None

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
            self._put_back()
        if self.lock is not None:
            self.lock.release(remove_file=discard and self.lock.made_file)
            self.lock = None

    def started(self) -> None:
        """Training has begun (or eval has written its results): the run that --overwrite replaced goes for good.
        It is renamed .discarded in one step, then removed (a removal a kill cuts short, the next command ends)."""
        if self.replaced is not None:
            replaced_run.discard(self.dir, self.replaced)
            self.replaced = None

    def continue_with(self) -> str:
        """The command that resumes this run, ready to paste."""
        return f"continue with: python -m ladder.run {self.rung} --resume {shlex.quote(str(self.dir))}"

    def removed(self) -> RunStopped | None:
        """If the run directory is gone (removed while the run wrote into it, by the learner's code say): the one
        line that says so, with no advice to resume what is no longer there."""
        if self.dir.is_dir():
            return None
        return RunStopped(f"the run directory {self.dir} was removed during the run; nothing is left to resume")

    def _write_failed(self, path: Path, error: OSError) -> RunStopped:
        """A write that failed during the run (a full disk, say): one line, and how to go on."""
        if (gone := self.removed()) is not None:
            return gone
        if not self.trains:  # eval: nothing to keep, nothing to continue
            return RunStopped(_cannot_write(str(path), error))
        kept = "the last good checkpoint is kept" if self.checkpoint_path.exists() else "no checkpoint was saved yet"
        full = " (the disk is full)" if error.errno == errno.ENOSPC else ""
        return RunStopped(f"{_cannot_write(str(path), error)}; {kept}{full}; {self.continue_with()}")

    @staticmethod
    def read_config(out: str | os.PathLike) -> dict:
        """The options of the run in ``out``: of the run an interrupted --overwrite start set aside, if there is one
        (the next command on the directory puts it back before anything else)."""
        try:
            return json.loads(replaced_run.config_path(Path(out)).read_text())
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
        """Whole lines at the end of ``path``; a write that fails leaves the file as it was: cut back to its size
        before, in place (the disk may have no room for a copy; only the bytes this call added go)."""
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
        """Atomic and checked (``ladder.runtime.checkpoint_file``): an interruption (Ctrl-C, SIGTERM) or a failed write
        leaves the previous checkpoint and its sum; a failed write is one line."""
        if not self.writes:
            return
        state = dict(state, rung=self.rung, metrics_lines=len(self.records()))
        try:
            self.checkpoint_file.save(state)
        except OSError as e:
            raise self._write_failed(self.checkpoint_path, e) from None

    def load_checkpoint(self) -> dict | None:
        """The last checkpoint (its sha256 checked), with metrics.jsonl (and completions.jsonl) cut back to what it
        had seen. None: no checkpoint yet, and the run starts again from its first update (both files emptied)."""
        if not self.checkpoint_path.exists():
            if self.writes:
                self._rewrite(self.metrics_path, b"")
                self.completions_path.unlink(missing_ok=True)
            return None
        try:
            state = self.checkpoint_file.load()
        except CorruptCheckpoint as e:
            raise UsageError(f"--resume {self.dir}: checkpoint.pt is corrupt or partial ({e}); "
                             f"{_KEEP_THE_RUN}") from None
        if not isinstance(state, dict) or state.get("rung") != self.rung or "metrics_lines" not in state:
            raise UsageError(f"--resume {self.dir}: checkpoint.pt is not a '{self.rung}' checkpoint")
        if self.writes:
            self._cut_back(state)
        return state

    def _cut_back(self, state: dict) -> None:
        """metrics.jsonl and completions.jsonl as they were at the checkpoint (a torn last line dropped), each
        rewritten whole (``write_whole``): a kill while it happens leaves the file as it was."""
        need, there = state["metrics_lines"], self.metrics_path.exists()
        kept = _whole_lines(self.metrics_path, self.dir)[:need] if there else []
        if len(kept) < need:
            what = f"has {len(kept)} line{'' if len(kept) == 1 else 's'}" if there else "is missing"
            raise UsageError(f"--resume {self.dir}: metrics.jsonl {what}, the checkpoint needs its first "
                             f"{'line' if need == 1 else f'{need} lines'}; "
                             f"put it back to resume (the run's files are left as they were)")
        self._rewrite(self.metrics_path, "".join(line + "\n" for line in kept).encode())
        if self.completions_path.exists():  # the completions of updates the checkpoint has not seen go too
            rows = [line for line in _whole_lines(self.completions_path, self.dir)
                    if json.loads(line)["step"] <= state["step"]]
            self._rewrite(self.completions_path, "".join(line + "\n" for line in rows).encode())

    def _rewrite(self, path: Path, data: bytes) -> None:
        """``path`` replaced whole by ``data`` (``write_whole``); a write that fails is one line."""
        try:
            write_whole(path, data)
        except OSError as e:
            raise self._write_failed(path, e) from None

    def write_file(self, name: str, text: str) -> None:
        """DIR/name whole or not at all: written beside it, then renamed into place. A path's bytes that are not
        UTF-8 (decoded with surrogateescape) are written as they were."""
        self._rewrite(self.dir / name, text.encode("utf-8", "surrogateescape"))

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
            raise UsageError(f"--resume {run_dir}: line {i + 1} of {path.name} is not JSON; repair it to resume "
                             f"(the run's files are left as they were)") from None
    return lines


def read_completions(out: str | os.PathLike) -> list[dict]:
    """OUT/completions.jsonl as a list of dicts (step, group, question, completion, reward, rewards,
    advantage, length, truncated); empty if the run wrote none."""
    path = Path(out) / "completions.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]

