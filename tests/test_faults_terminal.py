"""The terminal around a run, for real: stdout into a pipe whose reader is gone (``| head -1``), two Ctrl-Cs
a few milliseconds apart, and an --out with spaces in the command printed to continue the run."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import held_run

from ladder.runtime.signals import Interrupts

MARKED_AT_THE_FIRST_LOG = """
import runpy, sys
from ladder.runtime import session

real_log = session.RunSession.log


def marked_log(self, *args, **kwargs):  # training is under way: say so on stderr, once
    real_log(self, *args, **kwargs)
    if self.step == 1:
        print("training", file=sys.stderr, flush=True)


session.RunSession.log = marked_log
sys.argv[0] = "ladder.run"
runpy.run_module("ladder.run", run_name="__main__")
"""
GRPO = ["grpo", "--preset", "tiny", "--steps", "3", "--eval-size", "2", "--prompts-per-step", "2", "--group-size",
        "2", "--max-new-tokens", "4", "--print-samples", "1", "--no-progress"]


def _ladder(*args) -> list[str]:
    return [sys.executable, "-m", "ladder.run", *map(str, args)]


def _clean_stderr(stderr: str) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr


def test_stdout_into_a_pipe_nobody_reads_costs_the_run_nothing(tmp_path):
    """The pipe's read end is closed before the run starts: every stdout write meets a broken pipe."""
    out = tmp_path / "run"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(_ladder("reinforce", "--total-steps", "300", "--no-progress", "--out", out),
                              stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    assert json.loads((out / "summary.json").read_text())["rung"] == "reinforce"


def test_a_run_piped_into_head_finishes_and_writes_its_files(tmp_path):
    """As ``… | head -1``: the first sample line is read, then the reader goes; the run prints more lines after
    that (the next updates' samples, the summary) and must still finish."""
    out = tmp_path / "run"
    run = subprocess.Popen(_ladder(*GRPO, "--out", out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, cwd=tmp_path, preexec_fn=held_run.as_a_shell_starts_it)
    try:
        first = run.stdout.readline()
        run.stdout.close()  # head -1 exits
        stderr = run.stderr.read()
        run.wait(timeout=300)
    finally:
        run.kill()
    assert first.startswith("[1] "), first
    assert run.returncode == 0, stderr[-3000:]
    _clean_stderr(stderr)
    assert json.loads((out / "summary.json").read_text())["steps"] == 3
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]


def _interrupted_twice(tmp_path: Path, out: Path) -> subprocess.CompletedProcess:
    """A long run, sent SIGINT twice 3 ms apart once its first update is logged."""
    (tmp_path / "marked.py").write_text(MARKED_AT_THE_FIRST_LOG)
    args = ["cartpole", "--total-steps", "10000000", "--no-stop-on-solve", "--checkpoint-every", "1",
            "--no-progress", "--out", str(out)]
    run = subprocess.Popen([sys.executable, str(tmp_path / "marked.py"), *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                           preexec_fn=held_run.as_a_shell_starts_it)
    try:
        lines = iter(run.stderr.readline, "")  # ends if the run ends before it trains
        training = any(line.strip() == "training" for line in lines)
        if training:
            run.send_signal(signal.SIGINT)
            time.sleep(0.003)
            run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=300)
    finally:
        run.kill()
    assert training, stderr[-3000:]
    return subprocess.CompletedProcess(args, run.returncode, stdout, stderr)


def test_two_ctrl_c_end_in_one_line_and_a_command_that_pastes(tmp_path):
    out = tmp_path / "my runs" / "cart pole"
    done = _interrupted_twice(tmp_path, out)
    assert done.returncode == 130, done.stderr[-3000:]
    _clean_stderr(done.stderr)
    line = done.stderr.strip()
    assert line.splitlines() == [line] and line.startswith("interrupted; continue with: python -m ladder.run ")
    command = line.split("continue with: ", 1)[1]
    assert shlex.split(command) == ["python", "-m", "ladder.run", "cartpole", "--resume", str(out)]
    # pasted into a shell (this interpreter for `python`), it names the run: --print-config shows its directory
    pasted = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)}{command[len('python'):]} --print-config"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert pasted.returncode == 0, pasted.stderr[-3000:]
    assert json.loads(pasted.stdout)["out"] == str(out)


SWALLOWED_AT_THE_FIRST_LOG = """
import runpy, sys, time
from ladder.runtime import session

real_log = session.RunSession.log


class Swallows:
    def __del__(self):  # Python only prints an exception raised here: the Ctrl-C that lands here is lost
        print("waiting", file=sys.stderr, flush=True)
        time.sleep(120)


def marked_log(self, *args, **kwargs):
    real_log(self, *args, **kwargs)
    if self.step == 1:
        Swallows()  # dropped at once: its __del__ runs now
        print("training", file=sys.stderr, flush=True)


session.RunSession.log = marked_log
sys.argv[0] = "ladder.run"
runpy.run_module("ladder.run", run_name="__main__")
"""


def test_a_ctrl_c_a_library_swallowed_does_not_leave_a_run_no_ctrl_c_stops(tmp_path):
    """The first Ctrl-C lands in a ``__del__`` (its KeyboardInterrupt is printed and dropped, as in a library that
    cleans up there); the run trains on, and a Ctrl-C pressed later still stops it with the one line."""
    (tmp_path / "swallows.py").write_text(SWALLOWED_AT_THE_FIRST_LOG)
    out = tmp_path / "run"
    args = ["cartpole", "--total-steps", "10000000", "--no-stop-on-solve", "--checkpoint-every", "1",
            "--no-progress", "--out", str(out)]
    run = subprocess.Popen([sys.executable, str(tmp_path / "swallows.py"), *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                           preexec_fn=held_run.as_a_shell_starts_it)
    try:
        lines = iter(run.stderr.readline, "")
        assert any(line.strip() == "waiting" for line in lines)
        run.send_signal(signal.SIGINT)  # lands in __del__'s sleep and is dropped there
        assert any(line.strip() == "training" for line in lines)  # the run went on
        time.sleep(Interrupts.burst_s + 0.5)  # a separate Ctrl-C, not the same burst
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 130, stderr[-3000:]
    assert stderr.strip().splitlines()[-1].startswith("interrupted; continue with: python -m ladder.run cartpole")
