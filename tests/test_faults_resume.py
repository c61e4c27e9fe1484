"""``--resume DIR`` of a run directory that is not quite as the run left it: one line and exit 2 where it
cannot go on (nothing changed), a clean continuation where it can (a torn last line, as a write cut short
leaves it, is dropped), and one line naming the flags a resume ignores. CartPole as the rung that runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ladder.rungs import cartpole

STEPS = 768  # three updates of 8 × 32 transitions


def _interrupted(out: Path, **overrides) -> Path:
    """A run with a checkpoint after every update, whose summary.json is gone: as an interrupted run leaves it."""
    cartpole.train(cartpole.Config(out=str(out), total_steps=STEPS, checkpoint_every=1, eval_every=STEPS,
                                   eval_episodes=2, progress=False, **overrides))
    (out / "summary.json").unlink()
    return out


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return _interrupted(tmp_path_factory.mktemp("resume") / "run")


@pytest.fixture
def run_dir(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "run"))


def _snapshot(directory: Path) -> dict[str, bytes]:
    """Every file but the lock (which names the last process that held the directory)."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def _refused(cli, run_dir: Path, expected: str, *flags: str) -> str:
    before = _snapshot(run_dir)
    result = cli("cartpole", "--resume", str(run_dir), "--no-progress", *flags)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "Traceback" not in result.stderr
    assert expected in result.stderr, result.stderr
    assert _snapshot(run_dir) == before, "a refused resume changed the run directory"
    return result.stderr


def _write_byte_by_byte(path: Path, data: bytes) -> None:
    with path.open("ab", buffering=0) as f:
        for i in range(len(data)):
            f.write(data[i:i + 1])


def _resumes_to_the_end(cli, run_dir: Path) -> list[dict]:
    result = cli("cartpole", "--resume", str(run_dir), "--no-progress")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert (run_dir / "summary.json").exists()
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_missing_metrics_is_one_line(cli, run_dir):
    (run_dir / "metrics.jsonl").unlink()
    _refused(cli, run_dir, "metrics.jsonl is missing, the checkpoint needs its first 3 lines; put it back")


def test_metrics_cut_inside_what_the_checkpoint_saw_is_one_line(cli, run_dir):
    lines = (run_dir / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    (run_dir / "metrics.jsonl").write_bytes(b"")
    _write_byte_by_byte(run_dir / "metrics.jsonl", b"".join(lines[:2]) + lines[2][:40])
    _refused(cli, run_dir, "metrics.jsonl has 2 lines, the checkpoint needs its first 3 lines")


def test_metrics_cut_to_one_line_says_line(cli, run_dir):
    lines = (run_dir / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    (run_dir / "metrics.jsonl").write_bytes(b"")
    _write_byte_by_byte(run_dir / "metrics.jsonl", lines[0] + lines[1][:40])
    _refused(cli, run_dir, "metrics.jsonl has 1 line, the checkpoint needs its first 3 lines")


def test_a_broken_line_before_the_last_is_one_line(cli, run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "metrics.jsonl").write_text(lines[0] + "{not json\n" + "".join(lines[2:]))
    _refused(cli, run_dir, "line 2 of metrics.jsonl is not JSON")


def test_a_torn_last_metrics_line_is_dropped_and_the_run_finishes(cli, run_dir):
    """The checkpoint saw 3 lines; a 4th cut short (an update that died while writing) goes."""
    _write_byte_by_byte(run_dir / "metrics.jsonl", b'{"step": 4, "env_steps": 10')
    records = _resumes_to_the_end(cli, run_dir)
    assert [r["step"] for r in records] == [1, 2, 3]


def test_a_torn_last_completions_line_is_dropped_and_the_run_finishes(cli, run_dir):
    rows = [json.dumps({"step": s, "completion": f"c{s}"}) + "\n" for s in (1, 2, 3, 4)]  # 4: after the checkpoint
    _write_byte_by_byte(run_dir / "completions.jsonl", "".join(rows).encode() + b'{"step": 5, "compl')
    _resumes_to_the_end(cli, run_dir)
    kept = [json.loads(line)["step"] for line in (run_dir / "completions.jsonl").read_text().splitlines()]
    assert kept == [1, 2, 3]


def test_a_torn_checkpoint_is_one_line(cli, run_dir):
    whole = (run_dir / "checkpoint.pt").read_bytes()
    (run_dir / "checkpoint.pt").write_bytes(b"")
    _write_byte_by_byte(run_dir / "checkpoint.pt", whole[: len(whole) // 2])
    _refused(cli, run_dir, "checkpoint.pt is corrupt or partial")


def test_a_checkpoint_damaged_inside_is_refused_by_its_sha256(cli, run_dir):
    """Bytes overwritten in the middle (torch's zip reader checks no CRC: loaded, the generators' state is garbage)."""
    whole = bytearray((run_dir / "checkpoint.pt").read_bytes())
    middle = len(whole) // 2
    whole[middle:middle + 64] = bytes(64)
    (run_dir / "checkpoint.pt").write_bytes(bytes(whole))
    line = _refused(cli, run_dir, "checkpoint.pt is corrupt or partial (its sha256 is not the one "
                                  "checkpoint.pt.sha256 recorded when it was saved); put back an intact copy")
    assert "--overwrite" not in line  # the advice keeps the run: another --out


def test_a_checkpoint_saved_without_a_sum_still_resumes(cli, run_dir):
    """A checkpoint from before checkpoints had sums (or copied without its .sha256) is loaded unchecked."""
    (run_dir / "checkpoint.pt.sha256").unlink()
    records = _resumes_to_the_end(cli, run_dir)
    assert [r["step"] for r in records] == [1, 2, 3]


def test_a_checkpoint_of_another_hidden_size_is_one_line(cli, run_dir, tmp_path):
    other = _interrupted(tmp_path / "other", hidden=32)
    for name in ("checkpoint.pt", "checkpoint.pt.sha256"):  # moved with its sum: whole, but another run's
        shutil.copy(other / name, run_dir / name)
    _refused(cli, run_dir, "checkpoint.pt does not belong to this run: actor.0.bias is [32] there, [64] in the model "
                      "config.json builds")  # the first of the policy's parameters (by name) that differs


def test_flags_given_to_a_resume_are_named_as_ignored(cli, run_dir):
    saved = json.loads((run_dir / "config.json").read_text())
    result = cli("cartpole", "--resume", str(run_dir), "--lr", "0.5", "--hidden", str(saved["hidden"]),
                 "--preset", "tiny", "--print-config")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        f"ladder: note: --resume continues with the options {run_dir} started with; ignoring --lr, --preset"]
    assert json.loads(result.stdout)["lr"] == saved["lr"]  # the run's own, as the note says


def test_a_resume_with_only_its_own_flags_says_nothing(cli, run_dir):
    result = cli("cartpole", "--resume", str(run_dir), "--no-progress", "--device", "cpu", "--print-config")
    assert result.returncode == 0 and result.stderr == "", result.stderr
