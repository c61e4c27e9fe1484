"""SIGTERM and SIGHUP (``kill``, a scheduler's stop, a closed terminal) end a run as Ctrl-C does, for real: a
``python -m ladder.run`` process held at a known point (``held_run``) gets the signal there and ends in one line
with exit code 128 + the signal (143, 129; Ctrl-C 130), every file whole — also when the signal lands inside a
checkpoint's torch.save, inside the cut back of metrics.jsonl on --resume, or inside an --overwrite start, which
puts the run it was replacing back. Then --resume continues the run to its end. CartPole as the rung that runs."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import held_run
import pytest
import torch

from ladder.rungs import cartpole

UPDATES = 3  # of 8 × 32 transitions each
FAST = ["--total-steps", str(256 * UPDATES), "--eval-every", str(256 * UPDATES), "--eval-episodes", "2",
        "--no-progress"]


def _run_dir(tmp_path: Path, finished: bool) -> Path:
    """A run whose checkpoint saw 2 of the 3 lines of its metrics.jsonl; unfinished: its summary.json gone."""
    out = tmp_path / "run"
    cartpole.train(cartpole.Config(out=str(out), total_steps=256 * UPDATES, checkpoint_every=2,
                                   eval_every=256 * UPDATES, eval_episodes=2, progress=False))
    if not finished:
        (out / "summary.json").unlink()
    return out


def _snapshot(directory: Path) -> dict[str, bytes]:
    """Every file but the lock (which names the last process that held the directory)."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def _signalled(args: list, point: str, signum: int, cwd: Path) -> str:
    """Run ``python -m ladder.run ARGS``, held at ``point``, send it ``signum`` there; returns its one line."""
    with held_run.held([str(a) for a in args], point, cwd) as proc:
        held = held_run.wait_until_held(proc)
        done = held_run.stop(proc, signum)
    assert held and done.returncode == 128 + signum, done.stderr[-3000:]
    line = done.stderr.strip()
    assert line.splitlines() == [line] and "Traceback" not in line, done.stderr
    return line


def _resumes_to_the_end(cli, run_dir: Path) -> None:
    result = cli("cartpole", "--resume", run_dir, "--no-progress")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert (run_dir / "summary.json").exists() and steps == [1, 2, 3]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_a_run_that_resumes(cli, tmp_path, signum):
    out = tmp_path / "run"
    line = _signalled(["cartpole", *FAST, "--checkpoint-every", "1", "--out", out], "checkpoint", signum, tmp_path)
    name = signal.Signals(signum).name
    assert line == f"interrupted by {name}; continue with: python -m ladder.run cartpole --resume {out}"
    _resumes_to_the_end(cli, out)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_signal_inside_torch_save_keeps_the_previous_checkpoint(cli, tmp_path, signum):
    """The signal lands while torch.save writes the 2nd checkpoint (torch turns it into its own RuntimeError,
    "unexpected pos"): the run ends as interrupted, the 1st checkpoint whole, nothing half-written left."""
    out = tmp_path / "run"
    line = _signalled(["cartpole", *FAST, "--checkpoint-every", "1", "--out", out], "save:2", signum, tmp_path)
    assert line.endswith(f"; continue with: python -m ladder.run cartpole --resume {out}"), line
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 1
    assert not (out / "checkpoint.pt.tmp").exists()
    _resumes_to_the_end(cli, out)


def test_sigterm_while_resume_cuts_metrics_back_changes_nothing(cli, tmp_path):
    run_dir = _run_dir(tmp_path, finished=False)
    before = _snapshot(run_dir)
    line = _signalled(["cartpole", "--resume", run_dir, "--no-progress"], "replace:.metrics.jsonl.tmp",
                      signal.SIGTERM, tmp_path)
    assert line == f"interrupted by SIGTERM; continue with: python -m ladder.run cartpole --resume {run_dir}"
    assert _snapshot(run_dir) == before
    _resumes_to_the_end(cli, run_dir)


def test_sighup_during_an_overwrite_start_puts_the_finished_run_back(tmp_path):
    """Once the old run is set aside, just before the new config.json lands: the old run is back as it was, and,
    finished, it is not offered to --resume."""
    run_dir = _run_dir(tmp_path, finished=True)
    before = _snapshot(run_dir)
    line = _signalled(["cartpole", *FAST, "--seed", "1", "--out", run_dir, "--overwrite"],
                      "replace:.config.json.tmp:2", signal.SIGHUP, tmp_path)
    assert line == "interrupted by SIGHUP"
    assert _snapshot(run_dir) == before and not (tmp_path / "run" / ".replaced").exists()

