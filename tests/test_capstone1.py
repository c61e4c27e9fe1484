"""Capstone I's grader: the reference answer passes every property (and solves CartPole within the budget),
a sheet of stubs is "not implemented yet", each planted bug is caught by its property in one or two lines,
and ``pytest exercises/test_capstone1.py`` reports a failure without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from planted_bugs_capstone1 import CAUSES, PLANTED_CAPSTONE1

from ladder.graders import capstone_ppo, load
from ladder.graders.capstone_ppo import LABELS, NOT_IMPLEMENTED, PROPERTIES, SHEET, grade, grade_file

ROOT = Path(__file__).resolve().parents[1]
FAST = [name for name in PROPERTIES if name != "solves_cartpole"]
FIRST_STUB = {"agent": "__init__", "make_envs": "make_envs", "rollout": "collect_rollout",   # the stub that stops it
              "truncation_bootstrap": "collect_rollout", "gae": "gae", "gae_inputs": "gae", "loss": "__init__",
              "optimiser_steps": "__init__", "minibatches": "__init__", "update_generator": "__init__",
              "pi_old": "__init__", "grad_clip": "__init__", "update_stats": "__init__", "evaluate": "evaluate",
              "rollout_chain": "train", "advantages_wiring": "train", "env_steps": "train", "reproducible": "train",
              "solves_cartpole": "train"}


@pytest.fixture(scope="module")
def reference():
    return load(ROOT / "solutions" / SHEET)


@pytest.mark.parametrize("prop", FAST)
def test_the_reference_has_every_property(reference, prop):
    assert grade(reference, prop) == ("passed", "")


@pytest.mark.trained
def test_the_reference_solves_cartpole_within_the_graders_budget(reference):
    """The one slow test: the reference trains (about 10 s on one thread here) and 20 greedy episodes average ≥ 475."""
    assert grade(reference, "solves_cartpole") == ("passed", "")


@pytest.mark.parametrize("prop", PROPERTIES)
def test_the_shipped_sheet_is_stubs_each_named_when_it_stops_a_property(prop):
    status, message = grade_file(ROOT / "exercises", prop)
    assert status == NOT_IMPLEMENTED and message == f"{NOT_IMPLEMENTED} ({FIRST_STUB[prop]})"


def test_an_exception_in_the_learners_code_is_one_line_naming_function_and_line(tmp_path):
    source = (ROOT / "solutions" / SHEET).read_text()
    (tmp_path / SHEET).write_text(source.replace("not_done = 1.0 - (terminated | truncated).float()",
                                                 "not_done = 1.0 - (terminated + truncated)"))
    line = 1 + source[:source.index("not_done = 1.0 - (terminated")].count("\n")
    status, message = grade(load(tmp_path / SHEET), "gae")
    assert status == "failed" and len(message.splitlines()) == 1
    assert message.startswith(f"gae: raised RuntimeError in gae, line {line} of {SHEET}: "), message


def test_a_missing_sheet_is_not_implemented_yet(tmp_path):
    status, message = grade_file(tmp_path, "gae")
    assert status == NOT_IMPLEMENTED and message.startswith(NOT_IMPLEMENTED)


@pytest.mark.parametrize("label", PLANTED_CAPSTONE1)
def test_planted_bug_is_caught_by_its_property(label):
    prop, module = PLANTED_CAPSTONE1[label]
    status, message = grade(module, prop)
    assert status == "failed", f"the grader's {prop} let '{label}' pass"
    assert message.startswith(LABELS[prop]) and len(message.splitlines()) <= 2, message
    assert CAUSES.get(label, "") in message, f"the message should say '{CAUSES[label]}': {message}"


def test_every_fast_property_catches_a_planted_bug():
    assert {prop for prop, _ in PLANTED_CAPSTONE1.values()} == set(FAST)


def test_pytest_exercises_reports_a_broken_property_in_a_line_without_traceback(tmp_path):
    source = (ROOT / "solutions" / SHEET).read_text()
    (tmp_path / SHEET).write_text(source.replace("if truncated.any():", "if False:"))
    env = dict(os.environ, LADDER_EXERCISES=str(tmp_path))
    select = "truncation or gae and not inputs"
    proc = subprocess.run([sys.executable, "-m", "pytest", "exercises/test_capstone1.py", "-k", select],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED exercises/test_capstone1.py::test_capstone1[truncation_bootstrap]" in proc.stdout
    assert "truncation bootstrap: collect_rollout(a fixed controller" in proc.stdout and "1 passed" in proc.stdout
    assert "Traceback" not in proc.stdout


def test_a_run_that_does_not_solve_names_the_fast_properties_that_fail(monkeypatch):
    """solves_cartpole on a budget too short to solve in, for the sheet that stores the obs step() returned
    (off by one): the message names rollout, the one fast property that fails."""
    monkeypatch.setitem(capstone_ppo.SOLVE, "total_steps", 1_500)
    status, message = grade(PLANTED_CAPSTONE1["the obs stored is the one step() returned (off by one)"][1],
                            "solves_cartpole")
    assert status == "failed" and len(message.splitlines()) == 2, message
    assert message.splitlines()[1] == "  the fast properties that fail, to fix first: rollout", message


CORRECT_VARIANTS = {   # a train wired right in another way than the reference's: the wiring properties pass it
    "advantages whitened over the batch": [(
        "batch.update(advantages=advantages.flatten(),",
        "batch.update(advantages=(advantages.flatten() - advantages.mean()) / (advantages.std() + 1e-8),")],
    "the batch flattened step-major ([T, N])": [
        ("batch = {k: buffer[k].flatten(0, 1)", "batch = {k: buffer[k].transpose(0, 1).flatten(0, 1)"),
        ("batch.update(advantages=advantages.flatten(), returns=returns.flatten())",
         "batch.update(advantages=advantages.T.flatten(), returns=returns.T.flatten())")],
}


@pytest.mark.parametrize("variant", CORRECT_VARIANTS)
def test_a_train_wired_right_another_way_passes_the_wiring(tmp_path, variant):
    source = (ROOT / "solutions" / SHEET).read_text()
    for old, new in CORRECT_VARIANTS[variant]:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    (tmp_path / SHEET).write_text(source)
    assert grade(load(tmp_path / SHEET), "advantages_wiring") == ("passed", "")


def test_the_spies_leave_the_module_as_it_was_when_train_raises():
    sheet = load(ROOT / "exercises" / SHEET)
    before = {name: getattr(sheet, name) for name in ("collect_rollout", "gae", "update")}
    assert grade(sheet, "rollout_chain") == (NOT_IMPLEMENTED, f"{NOT_IMPLEMENTED} (train)")
    assert all(getattr(sheet, name) is function for name, function in before.items())
