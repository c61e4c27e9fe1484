"""SIGKILL (what the OOM killer sends) at the exact write a run is making, for real: a ``python -m ladder.run``
process held at that write (``held_run``) is killed, then the next command on its directory runs. Nothing is lost:
each file is as it was before the write or as the write meant it, --resume continues the run to its end, and a
finished run an --overwrite start was replacing is back. CartPole as the rung that runs."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import held_run
import pytest
import torch

from ladder.rungs import cartpole

UPDATES = 3  # of 8 × 32 transitions each
FAST = ["--total-steps", str(256 * UPDATES), "--eval-every", str(256 * UPDATES), "--eval-episodes", "2",
        "--no-progress"]
LEFTOVERS = (".metrics.jsonl.tmp", ".completions.jsonl.tmp", ".config.json.tmp", "checkpoint.pt.tmp",
             ".checkpoint.pt.sha256.tmp", ".replacing", ".replaced", ".discarded")


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, Path]:
    """A finished run, and an unfinished one: its checkpoint saw 2 of the 3 lines of its metrics.jsonl."""
    base = tmp_path_factory.mktemp("templates")
    for name in ("finished", "unfinished"):
        cartpole.train(cartpole.Config(out=str(base / name), total_steps=256 * UPDATES, checkpoint_every=2,
                                       eval_every=256 * UPDATES, eval_episodes=2, progress=False))
    (base / "unfinished" / "summary.json").unlink()
    return {"finished": base / "finished", "unfinished": base / "unfinished"}


def _copy(templates, name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(templates[name], tmp_path / name))


def _snapshot(directory: Path) -> dict[str, bytes]:
    """Every file but the lock (which names the last process that held the directory)."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def _killed(args: list, point: str, cwd: Path) -> None:
    """Run ``python -m ladder.run ARGS``, held at ``point``, and SIGKILL it there."""
    with held_run.held([str(a) for a in args], point, cwd) as proc:
        held = held_run.wait_until_held(proc)
        done = held_run.stop(proc, signal.SIGKILL)
    assert held and done.returncode == -signal.SIGKILL, done.stderr[-3000:]


def _steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def _resumes_to_the_end(cli, run_dir: Path) -> None:
    result = cli("cartpole", "--resume", run_dir, "--no-progress")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert (run_dir / "summary.json").exists() and _steps(run_dir / "metrics.jsonl") == [1, 2, 3]
    assert not [name for name in LEFTOVERS if (run_dir / name).exists()]


@pytest.mark.parametrize("name", ["metrics.jsonl", "completions.jsonl"])
def test_a_kill_while_resume_cuts_a_file_back_loses_none_of_it(cli, templates, tmp_path, name):
    """--resume rewrites metrics.jsonl and completions.jsonl as they were at the checkpoint (update 2 of the 3
    they hold). Killed just before the rewrite replaces the file, the file is whole; the next --resume finishes."""
    run_dir = _copy(templates, "unfinished", tmp_path)
    rows = "".join(json.dumps({"step": step, "completion": f"c{step}"}) + "\n" for step in (1, 2, 3))
    (run_dir / "completions.jsonl").write_text(rows)
    before = _snapshot(run_dir)
    _killed(["cartpole", "--resume", run_dir, "--no-progress"], f"replace:.{name}.tmp", tmp_path)
    assert (run_dir / name).read_bytes() == before[name]
    assert _steps(run_dir / "metrics.jsonl")[:2] == [1, 2] and (run_dir / "checkpoint.pt").read_bytes() == before[
        "checkpoint.pt"]
    _resumes_to_the_end(cli, run_dir)
    assert _steps(run_dir / "completions.jsonl") == [1, 2]  # those of updates the checkpoint saw; 3 comes again


@pytest.mark.parametrize("point, saved_step", [("save:2", 1), ("replace:checkpoint.pt.tmp:2", 1),
                                               ("replace:.checkpoint.pt.sha256.tmp:4", 2)],
                         ids=["inside torch.save", "before the rename", "after the rename, before the sum"])
def test_a_kill_while_a_checkpoint_is_saved_leaves_one_that_resumes(cli, tmp_path, point, saved_step):
    """The 2nd checkpoint, killed while torch.save writes it, before it replaces the 1st, or once it has but
    checkpoint.pt.sha256 still lists both sums: a whole checkpoint whose sum is listed, which --resume accepts."""
    out = tmp_path / "run"
    _killed(["cartpole", *FAST, "--checkpoint-every", "1", "--out", out], point, tmp_path)
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == saved_step
    _resumes_to_the_end(cli, out)
    assert len((out / "checkpoint.pt.sha256").read_text().splitlines()) == 1


@pytest.mark.parametrize("point", ["replace:metrics.jsonl", "replace:.config.json.tmp:2"],
                         ids=["while the old run is set aside", "once it is"])
def test_a_kill_during_an_overwrite_start_is_undone_by_the_next_command(cli, templates, tmp_path, point):
    """--overwrite with other options (--hidden 32) over an unfinished run, killed while it sets the old run aside
    or once it has: the next command (here --resume) first puts the old run back, then resumes it as it was."""
    run_dir = _copy(templates, "unfinished", tmp_path)
    before = _snapshot(run_dir)
    _killed(["cartpole", *FAST, "--hidden", "32", "--out", run_dir, "--overwrite"], point, tmp_path)
    assert (run_dir / ".replacing").is_dir() or (run_dir / ".replaced").is_dir()
    _resumes_to_the_end(cli, run_dir)
    assert json.loads((run_dir / "config.json").read_text())["hidden"] == 64  # the old run's, as it started
    lines = (run_dir / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    assert b"".join(lines[:2]) == b"".join(before["metrics.jsonl"].splitlines(keepends=True)[:2])


def test_after_a_killed_overwrite_start_the_finished_run_is_back(cli, templates, tmp_path):
    """The next command that is refused (a start without --overwrite) has put the finished run back first."""
    run_dir = _copy(templates, "finished", tmp_path)
    before = _snapshot(run_dir)
    _killed(["cartpole", *FAST, "--seed", "1", "--out", run_dir, "--overwrite"], "replace:.config.json.tmp:2",
            tmp_path)
    assert not (run_dir / "summary.json").exists()  # killed with the old run set aside
    result = cli("cartpole", *FAST, "--out", run_dir)
    assert result.returncode == 2 and result.stderr.strip() == (
        f"ladder: error: --out {run_dir} already holds a finished run; pass --overwrite to replace it or choose "
        f"another --out")
    assert _snapshot(run_dir) == before
