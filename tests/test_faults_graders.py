"""A learner's code that hangs or calls ``sys.exit``, at import or inside a graded call: every grader names it in
one line and goes on; ``--use-exercises`` stops with ``ladder: error:`` and exit 2 before training.

Each fault is the learner's own file, run for real under a short limit (``$LADDER_EXERCISE_LIMIT_S``)."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli

from ladder.graders import EXERCISES, LIMIT_VARIABLE, TRAINING_LIMITS, capstone_ppo, limit_s, load
from ladder.graders.capstone_grpo import check
from ladder.graders.grading import CASES, grade, grade_file
from ladder.runtime.runlog import UsageError

ROOT = Path(__file__).resolve().parents[1]
BY_STEM = {e.stem: e for e in EXERCISES}
HANGS = "def gae(rewards, values, dones, gamma, lam, last_values=None):\n    while True: pass\n"   # line 2
EXITS_AT_IMPORT = "import sys\n\nsys.exit(0)\n"                                                      # line 3
WHITEN_EXITS = "def whiten(x, mask=None, shift_mean=True, eps=1e-8):\n    import sys\n    sys.exit(3)\n"  # line 3


def first_case(stem: str) -> str:
    """How a grade names the first case of ``stem``: "on case 1/11 'its label'"."""
    cases = CASES[stem]()
    return f"on case 1/{len(cases)} {cases[0].label!r}"


def sheets(directory: Path, **files: str) -> Path:
    """Stubs of every exercise in ``directory``, then ``files`` (stem → source) over them."""
    directory.mkdir(parents=True, exist_ok=True)
    for e in EXERCISES:
        (directory / f"{e.stem}.py").write_text(f"def {e.function}(*args, **kwargs):\n    raise NotImplementedError\n")
    for stem, source in files.items():
        (directory / f"{stem}.py").write_text(source)
    return directory


def child_env(directory: Path, seconds: float) -> dict:
    return dict(os.environ, LADDER_EXERCISES=str(directory), **{LIMIT_VARIABLE: str(seconds)})


# --- the exercise grader ------------------------------------------------------------------------------------------

def test_pytest_exercises_names_a_hang_and_each_sys_exit_in_a_line_and_goes_on(tmp_path):
    """An endless loop in gae, sys.exit(0) at whiten's import, sys.exit(3) inside clipped_surrogate, and a Capstone
    II sampler that never stops (the reference's loop with its bounds removed): one line each, the table after."""
    directory = sheets(tmp_path, ex03_gae=HANGS, ex04_whiten=EXITS_AT_IMPORT, ex05_clipped_surrogate=(
        "def clipped_surrogate(ratio, advantages, clip_eps_low, clip_eps_high=None, delta=None):\n"
        "    raise SystemExit(3)\n"))
    (directory / "capstone2_grpo.py").write_text(endless_sampler())
    proc = subprocess.run([sys.executable, "-m", "pytest", "exercises/", "-p", "no:cacheprovider", "-k",
                           "ex03 or ex04 or ex05 or ex06 or sampler_stops_at_eos"], cwd=ROOT,
                          env=child_env(directory, 4), capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert f"ex03_gae: gae did not return within 4 s {first_case('ex03_gae')} (at ex03_gae.py:2)\n" in out
    assert "ex04_whiten: ex04_whiten.py called sys.exit(0) at import (line 3)\n" in out
    assert (f"ex05_clipped_surrogate: clipped_surrogate called sys.exit(3) {first_case('ex05_clipped_surrogate')} "
            "(at ex05_clipped_surrogate.py:2)\n") in out
    assert_sampler_named(out, "sampler_stops_at_eos", 4)
    assert "ex06_value_loss            not implemented yet" in out and "0 of 4 passed" in out   # and on it went
    assert "Traceback" not in out and "TimedOut" not in out and "SystemExit" not in out


def endless_sampler() -> str:
    """Capstone II's reference whose decode loop ignores max_new_tokens and EOS."""
    source = (ROOT / "solutions" / "capstone2_grpo.py").read_text()
    assert source.count("    for _ in range(max_new_tokens):\n") == 1
    return source.replace("    for _ in range(max_new_tokens):\n", "    while True:\n").replace(
        "        if finished.all():\n            break\n", "")


def assert_sampler_named(text: str, prop: str, seconds: float) -> None:
    """``text`` says, in one line, that ``sample`` was still running at the limit, on a line of its endless loop."""
    found = re.search(rf"^{prop}: sample did not return within {seconds:g} s \(at capstone2_grpo.py:(\d+)\)$", text,
                      re.MULTILINE)
    assert found, text
    lines = endless_sampler().splitlines()
    loop = lines.index("    while True:") + 1
    assert loop < int(found.group(1)) < loop + lines[loop:].index("    return torch.stack(tokens, 1), "
                                                                  "torch.stack(masks, 1), torch.stack(logps, 1)")


def test_a_hang_and_a_sys_exit_at_import_are_named_with_the_sheet_and_line_and_are_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "1")
    sheets(tmp_path, ex03_gae="while True: pass\n", ex04_whiten="import sys\nsys.exit()\n")
    hung = grade_file(tmp_path, BY_STEM["ex03_gae"])
    assert (hung.status, hung.message, hung.fatal) == ("failed", "ex03_gae.py did not finish importing within 1 s "
                                                                 "(line 1)", True)
    exited = grade_file(tmp_path, BY_STEM["ex04_whiten"])
    assert (exited.message, exited.fatal) == ("ex04_whiten.py called sys.exit() at import (line 2)", True)


def test_an_earlier_sheet_that_exits_at_import_is_the_one_named(tmp_path):
    """Exercise 19 imports exercise 3: the sys.exit is ex03's, and the grade of ex19 says so."""
    sheets(tmp_path, ex03_gae=EXITS_AT_IMPORT)
    shutil.copy(ROOT / "solutions" / "ex19_masked_gae.py", tmp_path)
    result = grade_file(tmp_path, BY_STEM["ex19_masked_gae"])
    assert (result.message, result.fatal) == ("ex03_gae.py called sys.exit(0) at import (line 3)", True)


def test_a_wrong_answer_is_not_fatal_and_ctrl_c_is_not_caught():
    assert not grade(lambda rewards, values, dones, gamma, lam, last_values=None: (values, values),
                     BY_STEM["ex03_gae"]).fatal

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        grade(interrupted, BY_STEM["ex03_gae"])


def test_the_limit_is_read_from_its_variable_and_a_bad_value_is_a_usage_error(monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "2.5")
    assert (limit_s(), limit_s(training=True)) == (2.5, 2.5 * TRAINING_LIMITS)
    monkeypatch.setenv(LIMIT_VARIABLE, "0")
    assert limit_s() == 0   # no limit
    for bad in ("ten", "-1", "inf"):
        monkeypatch.setenv(LIMIT_VARIABLE, bad)
        with pytest.raises(UsageError, match=f"{LIMIT_VARIABLE}='{bad}': expected a number of seconds"):
            limit_s()


def test_the_backstop_of_pytest_exercises_is_above_every_limit(monkeypatch):
    """A test of ``pytest exercises/`` is stopped whole only after its longest limit: the named line comes first."""
    monkeypatch.delenv(LIMIT_VARIABLE, raising=False)
    ini = configparser.ConfigParser()
    ini.read(ROOT / "exercises" / "pytest.ini")
    assert float(ini["pytest"]["timeout"]) > limit_s(training=True)


# --- --use-exercises ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fault, files, line", [
    ("an endless loop", {"ex03_gae": HANGS},
     f"ex03_gae: gae did not return within 1 s {first_case('ex03_gae')} (at ex03_gae.py:2)"),
    ("sys.exit(0) at import", {"ex03_gae": EXITS_AT_IMPORT}, "ex03_gae: ex03_gae.py called sys.exit(0) at import "
                                                             "(line 3)"),
    ("sys.exit(3) inside", {"ex04_whiten": WHITEN_EXITS}, "ex04_whiten: whiten called sys.exit(3) on case 1/11"),
])
def test_use_exercises_stops_before_training_with_one_line_and_exit_2(fault, files, line, tmp_path):
    directory = sheets(tmp_path / "mine", **files)
    proc = run_cli("cartpole", "--use-exercises", "--no-progress", "--total-steps", "1024", "--out",
                   str(tmp_path / "run"), cwd=tmp_path, env=child_env(directory, 1), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"ladder: error: --use-exercises: {line}") and proc.stderr.count("\n") == 1, \
        proc.stderr
    assert proc.stdout == "" and not (tmp_path / "run").exists()


# --- the capstones --------------------------------------------------------------------------------------------------

def test_capstone2_an_endless_sampler_is_named_in_one_line(tmp_path, monkeypatch):
    for path in (ROOT / "solutions").glob("ex*.py"):
        shutil.copy(path, tmp_path)
    (tmp_path / "capstone2_grpo.py").write_text(endless_sampler())
    sheet = load(tmp_path / "capstone2_grpo.py")
    monkeypatch.setenv(LIMIT_VARIABLE, "2")
    verdict = check("sampler_records_logp", sheet)
    assert verdict.status == "failed"
    assert_sampler_named(verdict.message, "sampler_records_logp", 2)


def test_capstone2_sys_exit_inside_the_sheet_is_named(tmp_path, monkeypatch):
    (tmp_path / "capstone2_grpo.py").write_text("import sys\n\n\ndef reward(completions, answers):\n"
                                                "    sys.exit(0)\n")
    verdict = check("reward_on_strings", load(tmp_path / "capstone2_grpo.py"))
    assert (verdict.status, verdict.message) == ("failed", "reward_on_strings: reward called sys.exit(0) "
                                                           "(at capstone2_grpo.py:5)")


def test_capstone1_sys_exit_and_a_hang_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "1")
    sheet = tmp_path / capstone_ppo.SHEET
    sheet.write_text(EXITS_AT_IMPORT)
    assert capstone_ppo.grade_file(tmp_path, "agent") == ("failed", f"{sheet.name} called sys.exit(0) at import "
                                                                    "(line 3)")
    sheet.write_text("def make_envs(n):\n    raise SystemExit(3)\n\n\ndef evaluate(agent, episodes, seed):\n"
                     "    while True: pass\n")
    assert capstone_ppo.grade_file(tmp_path, "make_envs") == (
        "failed", f"make_envs: called sys.exit(3) in make_envs, line 2 of {sheet.name}")
    assert capstone_ppo.grade_file(tmp_path, "evaluate") == (
        "failed", f"evaluate: evaluate did not return within 1 s (line 6 of {sheet.name})")
