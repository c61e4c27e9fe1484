"""A disk that fills up during a run, for real: the run directory lies on a small tmpfs, which the test fills
at a chosen moment (after the first checkpoint, say). Every write that then fails — checkpoint.pt (torch.save
reports it as a RuntimeError), metrics.jsonl, completions.jsonl, curves.png, summary.json — ends the run in
one line with exit code 1; nothing half-written stays, and ``--resume`` continues once there is room.
Needs root to mount the tmpfs; skipped otherwise."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from ladder.runtime import runlog, session

CARTPOLE = ["cartpole", "--total-steps", "768", "--eval-every", "768", "--eval-episodes", "2", "--no-progress"]


@pytest.fixture
def disk(tmp_path):
    """A 4 MiB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(root)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield root
    subprocess.run(["umount", "-l", str(root)], check=False)


def fill(root: Path, room: int) -> None:
    """Fill the disk, then give back ``room`` bytes."""
    fd = os.open(root / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while os.write(fd, bytes(1 << 16)):
            pass
    except OSError as e:
        assert e.errno == 28  # ENOSPC: the disk is full
    finally:
        os.close(fd)
    os.truncate(root / "filler", max(0, (root / "filler").stat().st_size - room))


def fill_after(monkeypatch, owner, method: str, calls: int, root: Path, room: int = 0) -> None:
    """Fill the disk once ``owner.method`` has returned ``calls`` times."""
    real, seen = getattr(owner, method), []

    def then_fill(*args, **kwargs):
        result = real(*args, **kwargs)
        seen.append(1)
        if len(seen) == calls:
            fill(root, room)
        return result

    monkeypatch.setattr(owner, method, then_fill)


def _stopped(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def _whole_lines(path: Path) -> list[dict]:
    text = path.read_text()
    assert text == "" or text.endswith("\n"), "a torn last line"
    return [json.loads(line) for line in text.splitlines()]


def _resume_once_there_is_room(cli, root: Path, out: Path, rung: str = "cartpole") -> None:
    (root / "filler").unlink()
    result = cli(rung, "--resume", out, "--no-progress")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "summary.json").read_text())


def test_a_full_disk_at_a_checkpoint_keeps_the_last_good_one(cli, disk, monkeypatch):
    """After the first checkpoint only 8 KiB are left: the second update's metrics line fits, its checkpoint
    (~150 KB) does not — torch.save raises a RuntimeError for it, which is reported as the full disk it is."""
    out = disk / "run"
    fill_after(monkeypatch, session.RunSession, "checkpoint", 1, disk, room=8192)
    line = _stopped(cli(*CARTPOLE, "--checkpoint-every", "1", "--out", out))
    assert line == (f"ladder: stopped: cannot write {out}/checkpoint.pt (No space left on device); the last good "
                    f"checkpoint is kept (the disk is full); continue with: python -m ladder.run cartpole "
                    f"--resume {out}")
    assert sorted(p.name for p in out.iterdir()) == [".lock", "checkpoint.pt", "checkpoint.pt.sha256", "config.json",
                                                     "metrics.jsonl"]
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 1
    assert [r["step"] for r in _whole_lines(out / "metrics.jsonl")] == [1, 2]
    _resume_once_there_is_room(cli, disk, out)
    assert [r["step"] for r in _whole_lines(out / "metrics.jsonl")] == [1, 2, 3]


def test_a_full_disk_at_the_first_metrics_line(cli, disk, monkeypatch):
    """Full before the first update: its metrics line cannot be written, and nothing of it stays."""
    out = disk / "run"
    fill_after(monkeypatch, session.RunSession, "resume", 1, disk)
    line = _stopped(cli(*CARTPOLE, "--out", out))
    assert line.startswith(f"ladder: stopped: cannot write {out}/metrics.jsonl (No space left on device); "
                           f"no checkpoint was saved yet (the disk is full); continue with:")
    assert (out / "metrics.jsonl").read_text() == ""
    _resume_once_there_is_room(cli, disk, out)
    assert [r["step"] for r in _whole_lines(out / "metrics.jsonl")] == [1, 2, 3]


def test_a_full_disk_when_the_run_finishes(cli, disk, monkeypatch):
    """Room for policy.pt (40 KB) after the last checkpoint, not for the learning curves: no summary.json,
    so the run is still one to resume, and no temporary file stays."""
    out = disk / "run"
    fill_after(monkeypatch, session.RunSession, "checkpoint", 3, disk, room=48 << 10)
    line = _stopped(cli(*CARTPOLE, "--checkpoint-every", "1", "--out", out))
    assert "(No space left on device); the last good checkpoint is kept (the disk is full)" in line
    assert not (out / "summary.json").exists() and not [p for p in out.iterdir() if "tmp" in p.name]
    _resume_once_there_is_room(cli, disk, out)


def test_a_full_disk_when_the_rung_saves_its_final_weights(cli, disk, monkeypatch):
    """Full after the last checkpoint: the rung's own torch.save of policy.pt fails (a RuntimeError), still one
    line, and the run is one to resume."""
    out = disk / "run"
    fill_after(monkeypatch, session.RunSession, "checkpoint", 3, disk)
    line = _stopped(cli(*CARTPOLE, "--checkpoint-every", "1", "--out", out))
    assert line == (f"ladder: stopped: a write into {out} failed (RuntimeError): the disk is full; the last good "
                    f"checkpoint is kept; continue with: python -m ladder.run cartpole --resume {out}")
    _resume_once_there_is_room(cli, disk, out)
    assert torch.load(out / "policy.pt", weights_only=True)


def test_a_full_disk_when_eval_writes_its_summary(cli, disk, monkeypatch):
    """One page left once eval has claimed its directory: completions.jsonl fits, summary.json does not. The
    directory this eval created has nothing of value and goes."""
    out = disk / "eval"
    fill_after(monkeypatch, runlog.RunLog, "__init__", 1, disk, room=4096)
    line = _stopped(cli("eval", "--preset", "tiny", "--eval-size", "2", "--max-new-tokens", "4", "--out", out))
    assert line == f"ladder: stopped: cannot write {out}/summary.json (No space left on device)"
    assert not out.exists()


def test_a_full_disk_when_grpo_writes_its_completions(cli, disk, monkeypatch):
    out = disk / "run"
    fill_after(monkeypatch, session.RunSession, "resume", 1, disk)  # full as the first update begins
    line = _stopped(cli("grpo", "--preset", "tiny", "--steps", "2", "--eval-size", "2", "--prompts-per-step", "2",
                        "--group-size", "2", "--max-new-tokens", "4", "--print-samples", "1", "--no-progress",
                        "--out", out))
    assert line.startswith(f"ladder: stopped: cannot write {out}/completions.jsonl (No space left on device)"), line
    assert not (out / "completions.jsonl").exists() or (out / "completions.jsonl").read_text() == ""
    _resume_once_there_is_room(cli, disk, out, rung="grpo")
    assert [r["step"] for r in _whole_lines(out / "completions.jsonl")] == [1, 1, 1, 1, 2, 2, 2, 2]
