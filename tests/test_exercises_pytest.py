"""``pytest exercises/``: the learner's way to grade a directory of exercises, in a few lines per result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ladder.graders import EXERCISES

ROOT = Path(__file__).resolve().parents[1]


def write_stubs(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for e in EXERCISES:
        (directory / f"{e.stem}.py").write_text(f"def {e.function}(*args, **kwargs):\n    raise NotImplementedError\n")
    return directory


def _pytest_exercises(directory: Path | str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LADDER_EXERCISES=str(directory))
    return subprocess.run([sys.executable, "-m", "pytest", "exercises/", "-p", "no:cacheprovider"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def test_pytest_exercises_reports_stubs_as_not_implemented_without_tracebacks(tmp_path):
    proc = _pytest_exercises(write_stubs(tmp_path / "stubs"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("not implemented yet") == len(EXERCISES)
    assert proc.stdout.splitlines()[1] == "=" * 36 + " grades " + "=" * 36, proc.stdout
    assert "Traceback" not in proc.stdout and "NotImplementedError" not in proc.stdout


def test_one_sheet_named_on_the_command_line_is_graded_alone(tmp_path):
    """``cd exercises && pytest ex26*``: the named sheet is graded (not "no tests ran"), with its line in the table."""
    stub = subprocess.run([sys.executable, "-m", "pytest", "ex26_bradley_terry.py"], cwd=ROOT / "exercises",
                          capture_output=True, text=True, timeout=300)
    assert stub.returncode == 0, stub.stdout + stub.stderr
    assert "ex26_bradley_terry" in stub.stdout and "not implemented yet" in stub.stdout
    assert "0 of 1 passed" in stub.stdout and "no tests ran" not in stub.stdout
    for name in ("conftest.py", "pytest.ini"):
        (tmp_path / name).write_text((ROOT / "exercises" / name).read_text())
    sheet = tmp_path / "ex27_dpo_loss.py"
    sheet.write_text((ROOT / "solutions" / "ex27_dpo_loss.py").read_text())
    solved = subprocess.run([sys.executable, "-m", "pytest", sheet.name], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert solved.returncode == 0 and "1 of 1 passed" in solved.stdout, solved.stdout + solved.stderr
    sheet.write_text(sheet.read_text().replace("return -F.logsigmoid", "return F.logsigmoid"))
    wrong = subprocess.run([sys.executable, "-m", "pytest", sheet.name], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert wrong.returncode == 1 and "FAILED" in wrong.stdout and "Traceback" not in wrong.stdout


# Graded here as stubs: each trains the tiny LM for a few steps (twenty seconds apiece); that the grader passes their
# solutions is tested once, in test_exercises_grading.
LONG = ("ex20_grpo_step", "ex23_multi_turn")


def test_pytest_exercises_grades_a_directory_and_reports_a_bug_in_a_few_lines(tmp_path):
    write_stubs(tmp_path)
    for e in EXERCISES:
        if e.stem not in LONG:
            (tmp_path / f"{e.stem}.py").write_text((ROOT / "solutions" / f"{e.stem}.py").read_text())
    gae = tmp_path / "ex03_gae.py"
    gae.write_text(gae.read_text().replace("return advantages, advantages + values", "return advantages, values"))
    proc = _pytest_exercises(tmp_path)
    assert proc.returncode == 1
    assert "FAILED exercises/test_grades.py::test_exercise[ex03_gae]" in proc.stdout
    assert "expected  advantages=" in proc.stdout and "Traceback" not in proc.stdout
    # exercise 19 imports exercise 3 from the learner's own directory — not the stub in exercises/ — so it fails too
    assert "FAILED exercises/test_grades.py::test_exercise[ex19_masked_gae]" in proc.stdout
    assert f"{len(EXERCISES) - 2 - len(LONG)} of {len(EXERCISES)} passed" in proc.stdout
    assert proc.stdout.count("not implemented yet") == len(LONG)
    # the grades and nothing else: no banner of the notebook plugin, no table of durations, no warnings
    assert "nbmake" not in proc.stdout and "slowest" not in proc.stdout and "warnings summary" not in proc.stdout
