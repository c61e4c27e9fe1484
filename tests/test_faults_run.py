"""Faults around a run's directory: a run that fails after its first checkpoint keeps it (exit 1, one line
saying how to continue), eval never writes into another rung's run, --out and --overwrite never touch what is
not a run's, each command reports the files it wrote, any path works (bytes that are not UTF-8 included), and a
run whose directory is removed under it says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import held_run
import pytest

from ladder.rungs import cartpole
from ladder.runtime.runlog import UsageError
from ladder.runtime.session import RunSession

REWARDS = '''
import os

CALLS = {"n": 0}


def fails_at_3(completions, answers):
    """Scores fine twice, then raises on every call (unless the test has "fixed" it)."""
    CALLS["n"] += 1
    if CALLS["n"] >= 3 and not os.environ.get("LADDER_TEST_REWARD_FIXED"):
        raise ValueError("the scorer broke")
    return [0.0] * len(completions)
'''
GRPO = ["grpo", "--preset", "tiny", "--steps", "4", "--eval-size", "2", "--prompts-per-step", "2", "--group-size", "2",
        "--max-new-tokens", "4", "--no-progress"]
EVAL = ["eval", "--preset", "tiny", "--eval-size", "2", "--max-new-tokens", "4"]


def _one_line(result: subprocess.CompletedProcess, code: int) -> str:
    assert result.returncode == code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def finished_cartpole(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "cartpole run"
    cartpole.train(cartpole.Config(out=str(out), total_steps=256, eval_every=256, eval_episodes=2, progress=False))
    return out


# --- a fault after the first checkpoint keeps the run ----------------------------------------------------------

def test_a_reward_function_failing_after_a_checkpoint_keeps_the_run(cli, tmp_path, monkeypatch):
    (tmp_path / "rewards.py").write_text(REWARDS)
    out = tmp_path / "grpo run"
    result = cli(*GRPO, "--reward-funcs", f"{tmp_path / 'rewards.py'}:fails_at_3", "--checkpoint-every", "1",
                 "--out", out)
    line = _one_line(result, 1)
    assert line.startswith("ladder: stopped: reward function 'fails_at_3' raised ValueError: the scorer broke")
    assert line.endswith(f"the run so far is kept, continue with: python -m ladder.run grpo --resume '{out}'")
    assert [json.loads(r)["step"] for r in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert (out / "checkpoint.pt").exists() and not (out / "summary.json").exists()

    monkeypatch.setenv("LADDER_TEST_REWARD_FIXED", "1")  # the user mends the function, then continues
    resumed = cli("grpo", "--resume", out, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((out / "summary.json").read_text())["steps"] == 4


# --- eval's directory -------------------------------------------------------------------------------------------

def test_eval_never_writes_into_another_rungs_run(cli, finished_cartpole):
    before = _snapshot(finished_cartpole)
    for flags in ([], ["--overwrite"]):
        line = _one_line(cli(*EVAL, "--out", finished_cartpole, *flags), 2)
        assert f"--out {finished_cartpole} holds a 'cartpole' run; choose another --out" in line
    assert _snapshot(finished_cartpole) == before


def test_eval_writes_and_reports_its_own_files(cli, tmp_path):
    out = tmp_path / "eval"
    result = cli(*EVAL, "--out", out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == f"wrote {out}/config.json, summary.json, completions.jsonl"
    assert sorted(p.name for p in out.iterdir() if p.name != ".lock") == [
        "completions.jsonl", "config.json", "summary.json"]
    assert json.loads((out / "config.json").read_text())["rung"] == "eval"
    first = (out / "summary.json").read_text()
    assert "--overwrite" in _one_line(cli(*EVAL, "--out", out), 2)
    assert (out / "summary.json").read_text() == first
    assert cli(*EVAL, "--out", out, "--overwrite").returncode == 0


def test_a_training_run_reports_the_files_it_wrote(cli, tmp_path):
    out = tmp_path / "run"
    result = cli("cartpole", "--total-steps", "256", "--eval-episodes", "2", "--no-progress", "--out", out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == f"wrote {out}/metrics.jsonl, summary.json, curves.png"
    assert all((out / name).is_file() for name in ("config.json", "metrics.jsonl", "summary.json", "curves.png"))


# --- --out and --overwrite touch only what a run writes ----------------------------------------------------------

def test_a_directory_that_is_not_a_run_is_refused_even_with_overwrite(cli, tmp_path):
    mine = tmp_path / "my files"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (mine / "metrics.jsonl").write_text("my own metrics\n")
    for flags in ([], ["--overwrite"]):
        line = _one_line(cli("cartpole", "--total-steps", "256", "--no-progress", "--out", mine, *flags), 2)
        assert line == (f"ladder: error: --out {mine} holds files that are not a ladder run's; choose another --out "
                        f"(--overwrite replaces only a run directory)")
    assert _snapshot(mine) == {"notes.txt": b"mine", "metrics.jsonl": b"my own metrics\n"}


def test_overwrite_replaces_a_run_and_keeps_the_users_own_files(cli, tmp_path, finished_cartpole):
    out = tmp_path / "run"
    shutil.copytree(finished_cartpole, out)
    (out / "notes.txt").write_text("mine")
    old_summary = (out / "summary.json").read_text()
    result = cli("cartpole", "--total-steps", "256", "--eval-episodes", "2", "--seed", "1", "--no-progress",
                 "--out", out, "--overwrite")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "summary.json").read_text() != old_summary
    assert json.loads((out / "config.json").read_text())["seed"] == 1


def test_an_unfinished_run_is_not_replaced_without_overwrite(cli, tmp_path, finished_cartpole):
    out = tmp_path / "run"
    shutil.copytree(finished_cartpole, out)
    (out / "summary.json").unlink()
    line = _one_line(cli("cartpole", "--no-progress", "--out", out), 2)
    assert line == (f"ladder: error: --out {out} already holds an unfinished run; continue it with --resume {out}, "
                    f"pass --overwrite to replace it, or choose another --out")


def test_a_start_that_never_trains_puts_the_run_it_would_replace_back(tmp_path, finished_cartpole):
    """--overwrite sets the old run aside; bad input or Ctrl-C before the first update puts it back as it was,
    and only once training begins is it gone."""
    out = tmp_path / "run"
    shutil.copytree(finished_cartpole, out)
    before = _snapshot(out)
    cfg = cartpole.Config(out=str(out), overwrite=True, progress=False)
    for fault in (UsageError("bad input found while loading"), KeyboardInterrupt()):
        with pytest.raises(type(fault)):
            with RunSession(cfg, "cartpole"):
                raise fault
        assert _snapshot(out) == before
    with RunSession(cfg, "cartpole") as run:
        run.resume()
        assert sorted(p.name for p in out.iterdir()) == [".lock", "config.json", "metrics.jsonl"]


def test_eval_refused_after_overwrite_leaves_the_earlier_eval(cli, tmp_path):
    out, empty = tmp_path / "eval", tmp_path / "not-an-adapter"
    empty.mkdir()
    assert cli(*EVAL, "--out", out).returncode == 0
    before = _snapshot(out)
    line = _one_line(cli(*EVAL, "--out", out, "--overwrite", "--adapter", empty), 2)
    assert "no adapter_config.json there" in line
    assert _snapshot(out) == before


# --- any path; a directory removed during the run ---------------------------------------------------------------

CARTPOLE = ["cartpole", "--total-steps", "512", "--eval-every", "512", "--eval-episodes", "2", "--checkpoint-every",
            "1", "--no-progress"]


def test_an_out_whose_name_is_not_utf8_trains_resumes_and_prints_its_path(tmp_path):
    """``--out runs/caf\\xe9`` (Latin-1 bytes, as a shell passes them), stdout strict UTF-8 as on a UTF-8 terminal:
    the curves' title, config.json and the printed paths all take it; the path printed is the path."""
    out = b"runs/caf\xe9"
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([sys.executable, "-m", "ladder.run", *CARTPOLE, "--out", out], capture_output=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0 and done.stderr == b"", done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == b"wrote runs/caf\xe9/metrics.jsonl, summary.json, curves.png"
    run_dir = tmp_path / os.fsdecode(out)
    assert (run_dir / "curves.png").stat().st_size > 0
    assert os.fsencode(json.loads((run_dir / "config.json").read_text())["out"]) == out

    (run_dir / "summary.json").unlink()  # as an interrupted run leaves it
    resumed = subprocess.run([sys.executable, "-m", "ladder.run", "cartpole", "--resume", out, "--no-progress"],
                             capture_output=True, cwd=tmp_path, env=env, timeout=300)
    assert resumed.returncode == 0 and resumed.stderr == b"", resumed.stderr[-3000:]
    assert (run_dir / "summary.json").exists()


def test_a_run_directory_removed_during_the_run_is_one_line_without_resume_advice(tmp_path):
    """Removed while the run is held after its first record (as a learner's function that deletes it would)."""
    out = tmp_path / "run"
    with held_run.held([*CARTPOLE, "--out", str(out)], "log", tmp_path) as proc:
        held = held_run.wait_until_held(proc)
        shutil.rmtree(out)
        stdout, stderr = proc.communicate("go\n", timeout=300)
    assert held and proc.returncode == 1, stderr[-3000:]
    assert stderr.strip() == f"ladder: stopped: the run directory {out} was removed during the run; nothing is left " \
                             f"to resume"
