"""A signal in a command's first second — inside ``import torch``, before the run's own handlers exist — ends it in
one line with exit code 128 + the signal, for real: the process is started as a shell starts it, and the signal is
sent as soon as its first handlers are in place (read from the kernel: SIGTERM in /proc/PID/status's caught mask,
which only ``ladder.runtime.early_signals`` sets), while its heavy imports are still to come or under way."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import held_run
import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")


def _catches(pid: int, signum: int) -> bool:
    for text in Path(f"/proc/{pid}/status").read_text().splitlines():
        if text.startswith("SigCgt:"):
            return bool(int(text.split()[1], 16) >> (signum - 1) & 1)
    return False


def _signalled_while_importing(command: list[str], signum: int, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([sys.executable, *command], cwd=cwd, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=held_run.as_a_shell_starts_it)
    try:
        deadline = time.monotonic() + 60
        while not _catches(proc.pid, signal.SIGTERM) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert "torch" not in Path(f"/proc/{proc.pid}/maps").read_text(), "torch was loaded before the handlers"
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("command", [["-m", "ladder.run", "cartpole"], ["-m", "ladder.doctor", "."]],
                         ids=["run", "doctor"])
def test_a_signal_during_the_imports_ends_the_command_in_one_line(command, signum, tmp_path):
    result = _signalled_while_importing([*command, "--out", str(tmp_path / "run")] if "ladder.run" in command
                                        else command, signum, tmp_path)
    assert result.returncode == 128 + signum, result.stderr[-3000:]
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"interrupted{'' if signum == signal.SIGINT else ' by '}"
                                                  f"{'' if signum == signal.SIGINT else signal.Signals(signum).name}"]
    assert not (tmp_path / "run").exists()
