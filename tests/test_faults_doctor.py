"""Faults in what the run doctor reads, produced for real through ``python -m ladder.doctor`` in a subprocess.

A value in a log that is not a number, or a record whose step is not a whole number, is left out and said in one
line of the report: the doctor goes on. Everything else a user supplies that cannot serve — a file that is not a
log, a --trl-config value of the wrong kind, a doctor.png that cannot be written — is one line on stderr, exit
code 2, no traceback, and nothing written (no doctor.png, no temporary file). The last few cases, which take the
same path through the command line, are checked on ``read_run`` alone: each start of the command costs a second
or two (it imports torch)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from test_doctor import CONFIG, N, doctor, healthy_series, write_run

from ladder.doctor import diagnose, read_run
from ladder.doctor.report import plot_findings
from ladder.runtime.runlog import UsageError


def records() -> list[dict]:
    """The healthy run of test_doctor, one record per step."""
    series = healthy_series()
    return [{"step": i + 1, **{k: v[i] for k, v in series.items()}} for i in range(N)]


def lines_run(directory: Path, lines: list[str], config: dict | None = None) -> Path:
    """A ladder run whose metrics.jsonl holds ``lines`` as written."""
    write_run(directory, {}, config)
    (directory / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    return directory


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def refused(done: subprocess.CompletedProcess, *words: str) -> str:
    """One line on stderr, exit code 2, nothing on stdout; the line says ``words``."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("ladder: error: "), done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)
    return done.stderr


def diagnosed(done: subprocess.CompletedProcess) -> list[str]:
    """A verdict (exit code 0 or 1), nothing on stderr; its note lines."""
    assert done.returncode in (0, 1) and done.stderr == "", (done.returncode, done.stderr)
    return [line.strip() for line in done.stdout.splitlines() if line.startswith("  note: ")]


# --- a bad value in a log: left out, said in one line ------------------------------------------------------------

def test_values_that_are_not_numbers_and_steps_that_are_not_steps_are_left_out_and_said(tmp_path):
    """A 400-digit integer (beyond a float), a 5000-digit one (beyond Python's int parsing), a string, a boolean,
    nested junk; a step null, a word, 4.5, true, -1; NaN and ±Infinity are non-finite readings, left out
    silently (ladder writes a NaN as null)."""
    rows = [json.dumps(r) for r in records()]
    rows[1] = json.dumps({**records()[1], "loss": 10 ** 400})
    rows[2] = rows[2].replace('"loss": ', '"loss": 1' + "0" * 5000 + ', "was": ', 1)
    rows[3] = json.dumps({**records()[3], "reward": {"nested": [1, {"x": None}]}, "grad_norm": True})
    rows[4] = json.dumps({**records()[4], "clip_frac": "0.05", "\ud800\x1b[31m": [1]})
    rows[5] = json.dumps({**records()[5], "entropy": float("nan"), "kl_ref": float("inf"), "loss": -float("inf")})
    for i, step in zip(range(6, 11), (None, "three", 4.5, True, -1)):
        rows[i] = json.dumps({**records()[i], "step": step})
    run = lines_run(tmp_path / "junk", rows, CONFIG)
    notes = diagnosed(doctor(run, "--plot"))
    assert notes == [
        "note: metrics.jsonl: left out 5 records whose step is not a whole number ≥ 0 (first: line 7, step null)",
        'note: metrics.jsonl: left out 6 values that are not numbers (first: line 2, "loss": a 401-digit number, '
        "beyond a float)"]
    assert listing(run) == ["config.json", "doctor.png", "metrics.jsonl"]
    read = read_run(run)
    assert read.get("reward").steps == [1, 2, 3, 5, 6, 12] and 6 not in read.get("entropy").steps


def test_a_trl_log_with_null_and_word_steps_and_junk(tmp_path):
    """log_history: steps null and "three", entries that are not objects, a reward that is a list, a loss that is
    a string, a grad_norm NaN (a non-finite step, as TRL writes it)."""
    log = [{"step": s, "loss": 0.1, "grad_norm": 0.2, "learning_rate": 1e-5, "reward": 0.5, "reward_std": 0.4}
           for s in range(1, 9)]
    log[1]["step"], log[2]["step"], log[3]["reward"], log[4]["loss"] = None, "three", [0.5], "0.1"
    log[5]["grad_norm"] = float("nan")
    out = tmp_path / "trl"
    out.mkdir()
    (out / "trainer_state.json").write_text(json.dumps({"log_history": log + [7, None, "x"]}))
    done = doctor(out)
    assert diagnosed(done)[1:] == [
        "note: trainer_state.json: left out 2 records whose step is not a whole number ≥ 0 "
        "(first: log_history[1], step null)",
        "note: trainer_state.json: left out 3 entries that are not JSON objects (first: log_history[8]: 7)",
        'note: trainer_state.json: left out 2 values that are not numbers (first: log_history[3], "reward": a list)']
    assert done.returncode == 1 and "[problem] nonfinite" in done.stdout and "step(s) 6" in done.stdout


# --- bad input: one line, exit 2, nothing written ---------------------------------------------------------------

def test_a_trl_config_value_of_the_wrong_kind(tmp_path):
    out = tmp_path / "trl"
    out.mkdir()
    (out / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.1}]}))
    config = tmp_path / "grpo.json"
    config.write_text(json.dumps({"learning_rate": "1e-6", "num_iterations": 2}))
    refused(doctor(out, "--trl-config", config, "--plot"), f"--trl-config {config}", '"learning_rate" is "1e-6"',
            "a number")
    assert listing(out) == ["trainer_state.json"]


def _damaged(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name → (run directory, what the one line says)."""
    torn = json.dumps(records()[0])[:30]
    cases = {"empty": ([], "holds no update yet"), "only a torn line": ([torn], "holds no update yet"),
             "a JSON list for a record": ([json.dumps(records()[0]), "[1, 2]", json.dumps(records()[1])],
                                          "line 2 is not a JSON object")}
    made = {name: (lines_run(tmp_path / name.replace(" ", "_"), lines, CONFIG), said)
            for name, (lines, said) in cases.items()}
    folder = write_run(tmp_path / "folder", healthy_series(), CONFIG)
    (folder / "metrics.jsonl").unlink()
    (folder / "metrics.jsonl").mkdir()
    made["metrics.jsonl a directory"] = (folder, "metrics.jsonl is not a file")
    state = tmp_path / "trl_state"
    state.mkdir()
    (state / "trainer_state.json").write_text(json.dumps({"log_history": {"step": 1, "loss": 0.1}}))
    made["log_history not a list"] = (state, "has no log_history list")
    return made


@pytest.mark.parametrize("name", ["empty", "only a torn line", "a JSON list for a record",
                                  "metrics.jsonl a directory", "log_history not a list"])
def test_a_damaged_log_is_one_line(tmp_path, name):
    run, said = _damaged(tmp_path)[name]
    before = listing(run)
    refused(doctor(run, "--plot"), said)
    assert listing(run) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_log_is_one_line(tmp_path):
    run = write_run(tmp_path / "locked", healthy_series(), CONFIG)
    (run / "metrics.jsonl").chmod(0)
    try:
        refused(doctor(run), "metrics.jsonl: cannot read it (Permission denied)")
    finally:
        (run / "metrics.jsonl").chmod(stat.S_IRUSR | stat.S_IWUSR)


# --- doctor.png that cannot be written ----------------------------------------------------------------------------

def test_doctor_png_a_directory(tmp_path):
    run = write_run(tmp_path / "run", healthy_series(), CONFIG)
    (run / "doctor.png").mkdir()
    refused(doctor(run, "--plot"), f"cannot write {run / 'doctor.png'}: Is a directory")
    assert listing(run) == ["config.json", "doctor.png", "metrics.jsonl"] and (run / "doctor.png").is_dir()


@pytest.fixture
def read_only_run(tmp_path):
    """A run in a directory nobody may write: on a tmpfs remounted read-only as root (root ignores a mode)."""
    run = tmp_path / "disk" / "run"
    if os.geteuid() != 0:
        write_run(run, healthy_series(), CONFIG)
        run.chmod(0o555)
        yield run
        run.chmod(0o755)
        return
    run.parent.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(run.parent)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        write_run(run, healthy_series(), CONFIG)
        subprocess.run(["mount", "-o", "remount,ro", str(run.parent)], check=True, capture_output=True)
        yield run
    finally:
        subprocess.run(["umount", "-l", str(run.parent)], check=False)


def test_doctor_png_in_a_read_only_directory(read_only_run):
    refused(doctor(read_only_run, "--plot"), f"cannot write {read_only_run / 'doctor.png'}: ")
    assert listing(read_only_run) == ["config.json", "metrics.jsonl"]


# --- a path that is not UTF-8 ---------------------------------------------------------------------------------

def test_a_run_path_that_is_not_utf8_and_text_matplotlib_would_read_as_math(tmp_path):
    """A directory named with the byte \\xe9 (and $…$, which matplotlib would parse as mathtext), a metric named
    with $…$, a KL of ±1e308 (an axis from -1e308 to 1e308 is wider than a float): the report shows the byte as
    \\xe9, the plot is written."""
    run = tmp_path / (os.fsdecode(b"caf\xe9") + r" $\frac$")
    series = healthy_series() | {"rewards/$\\frac$/mean": [0.2 + 0.06 * i for i in range(N)],
                                 "rewards/correctness/mean": [0.4] * N,
                                 "kl_ref": [1e308 * (-1) ** i if i < 8 else 1e308 for i in range(N)]}
    write_run(run, series, CONFIG)
    done = doctor(run, "--plot")
    assert done.returncode == 1 and done.stderr == "", done.stderr
    shown = str(tmp_path) + r"/caf\xe9 $\frac$"
    assert done.stdout.startswith(f"{shown}: a ladder grpo run") and f"wrote {shown}/doctor.png" in done.stdout
    assert "[problem] kl_blowup" in done.stdout and "[problem] format_hacking" in done.stdout
    assert listing(run) == ["config.json", "doctor.png", "metrics.jsonl"]
    missing = doctor(run / "nowhere")
    refused(missing, r"caf\xe9 $\frac$/nowhere: no such directory")


# --- more of what a log can hold, on read_run: the command line says each in the one line above ---------------------

def _odd_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    fifo = write_run(tmp_path / "fifo", healthy_series(), CONFIG)
    (fifo / "metrics.jsonl").unlink()
    os.mkfifo(fifo / "metrics.jsonl")  # reading it would wait for a writer for ever
    rows = [json.dumps(r) for r in records()]
    deep = lines_run(tmp_path / "deep", rows[:3] + ["[" * 100_000 + "]" * 100_000] + rows[3:], CONFIG)
    no_steps = lines_run(tmp_path / "no_steps", [json.dumps({"step": None, "loss": 0.1})] * 3, CONFIG)
    bad_lr = write_run(tmp_path / "bad_lr", healthy_series(), {"lr": "1e-3"})
    bad_rung = write_run(tmp_path / "bad_rung", healthy_series(), {"rung": {"name": "grpo"}})
    long_name = tmp_path / ("x" * 300)
    return {"a FIFO for metrics.jsonl": (fifo, "metrics.jsonl is not a file"),
            "nesting too deep to parse": (deep, "line 4 is not JSON"),
            "no record with a step": (no_steps, "none of its 3 records has a usable step (line 1, step null)"),
            "lr a string in config.json": (bad_lr, 'config.json: "lr" is "1e-3" (a string); it must be a number'),
            "rung an object": (bad_rung, '"rung" is an object; it must be a string'),
            "a name too long": (long_name, "cannot look at it (File name too long)")}


@pytest.mark.parametrize("name", ["a FIFO for metrics.jsonl", "nesting too deep to parse", "no record with a step",
                                  "lr a string in config.json", "rung an object", "a name too long"])
def test_more_bad_input_is_a_usage_error(tmp_path, name):
    run, said = _odd_inputs(tmp_path)[name]
    with pytest.raises(UsageError) as refusal:
        read_run(run)
    assert said in str(refusal.value) and "\n" not in str(refusal.value)


def test_a_run_with_no_number_at_all_is_read_and_plotted(tmp_path):
    run = lines_run(tmp_path / "words", [json.dumps({"step": i, "reward": "high"}) for i in range(1, 5)], CONFIG)
    read = read_run(run)
    assert read.series == {} and diagnose(read) == []
    assert read.notes == ['metrics.jsonl: left out 4 values that are not numbers (first: line 1, "reward": "high")']
    plot_findings(read, [], run / "doctor.png")
    assert listing(run) == ["config.json", "doctor.png", "metrics.jsonl"]
