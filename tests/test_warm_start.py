"""A run forked from ``ladder.runtime.warm_start``'s server is ``python -m ladder.run`` as a fresh process runs it:
the same exit code, output, files and signal handling, in the directory and environment it was given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from ladder.runtime import warm_start
from ladder.runtime.runlog import without_timings

GRPO = ["grpo", "--preset", "tiny", "--steps", "2", "--eval-size", "2", "--prompts-per-step", "2", "--group-size",
        "2", "--max-new-tokens", "4", "--print-samples", "0", "--no-progress"]
# A reward function that reads the environment it was run in, and signals its own process when asked to.
SIGNALLING = '''
import os, signal

def signalling(completions, answers):
    name = os.environ.get("SIGNAL_AT_FIRST_REWARD")
    if name:
        os.kill(os.getpid(), getattr(signal, name))
    return [float(len(c) % 2) for c in completions]
'''


def _fresh(args: list[str], cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ladder.run", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def _metrics(path) -> list[dict]:
    return [without_timings(json.loads(line)) for line in path.read_text().splitlines()]


def test_a_run_gives_the_exit_code_output_and_files_of_a_fresh_process(tmp_path):
    fresh = _fresh([*GRPO, "--out", "fresh"], tmp_path)
    warm = warm_start.run_command([*GRPO, "--out", "warm"], cwd=tmp_path)  # relative: in the given directory
    assert fresh.returncode == warm.returncode == 0, warm.stderr[-3000:]
    assert warm.stderr == fresh.stderr
    assert warm.stdout.splitlines()[-1] == "wrote warm/metrics.jsonl, summary.json, curves.png"
    assert _metrics(tmp_path / "warm" / "metrics.jsonl") == _metrics(tmp_path / "fresh" / "metrics.jsonl")


@pytest.mark.parametrize("args", [["grpo", "--lr", "-1"], ["nosuchrung"], ["cartpole", "--total-steps", "x"]],
                         ids=["bad-value", "unknown-rung", "not-a-number"])
def test_bad_input_says_what_a_fresh_process_says(args, tmp_path):
    fresh = _fresh([*args, "--out", "run"], tmp_path)
    warm = warm_start.run_command([*args, "--out", "run"], cwd=tmp_path)
    assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert warm.returncode == 2 and not (tmp_path / "run").exists()


@pytest.mark.parametrize("name, code, line", [("SIGINT", 130, "interrupted"),
                                              ("SIGTERM", 143, "interrupted by SIGTERM")])
def test_a_signal_to_the_run_is_handled_as_in_a_fresh_process(name, code, line, tmp_path):
    """The server ignores Ctrl-C; the run it forks has a fresh interpreter's handlers, and its own environment."""
    (tmp_path / "signalling.py").write_text(SIGNALLING)
    args = [*GRPO, "--reward-funcs", "signalling.py:signalling", "--out", "run"]
    env = {**os.environ, "SIGNAL_AT_FIRST_REWARD": name}
    warm = warm_start.run_command(args, cwd=tmp_path, env=env)
    assert warm.returncode == code, warm.stderr[-3000:]
    assert warm.stderr.strip().splitlines()[-1].startswith(f"{line}; continue with: python -m ladder.run grpo --resume")
    resumed = warm_start.run_command(["grpo", "--resume", "run", "--no-progress"], cwd=tmp_path)  # no signal now
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 2


def test_a_run_past_its_timeout_is_killed(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        warm_start.run_command(["cartpole", "--total-steps", "10000000", "--no-progress", "--out", "run"],
                               cwd=tmp_path, timeout=3)
    after = warm_start.run_command(["cartpole", "--lr", "-1", "--out", "other"], cwd=tmp_path)  # the server lives on
    assert after.returncode == 2


def test_runs_asked_for_at_once_each_get_their_own_output(tmp_path):
    values = ["-1", "-2", "-3", "-4"]
    results = {}

    def ask(value):
        results[value] = warm_start.run_command(["grpo", "--lr", value, "--out", f"run{value}"], cwd=tmp_path)

    threads = [threading.Thread(target=ask, args=(value,)) for value in values]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for value in values:
        assert results[value].returncode == 2
        assert results[value].stderr == f"ladder: error: --lr must be positive, got {float(value)}\n"


def test_a_killed_server_is_started_again(tmp_path):
    warm_start.run_command(["grpo", "--lr", "-1", "--out", "run"], cwd=tmp_path)
    server = warm_start._server().process
    server.kill()
    server.wait()
    again = warm_start.run_command(["grpo", "--lr", "-1", "--out", "run"], cwd=tmp_path)
    assert again.returncode == 2 and again.stderr == "ladder: error: --lr must be positive, got -1.0\n"
    assert warm_start._server().process.pid != server.pid
