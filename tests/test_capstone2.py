"""Capstone II's grader: the reference passes every property, the shipped sheet is stubs reported as not
implemented, each planted bug is caught by the property it names in one or two lines, and the reference
imports nothing of ladder's. ``train_learns`` is the one slow test (about half a minute on one thread)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from planted_bugs_capstone2 import NAMED_CAUSE, PLANTED_CAPSTONE2, REFERENCE, mutant

from ladder.graders import load
from ladder.graders.capstone_grpo import NOT_IMPLEMENTED, PROPERTIES, SLOW, check
from ladder.graders.capstone_grpo_spy import SPIED
from ladder.graders.capstone_grpo_task import load_model
from ladder.graders.capstone_grpo_train import WIRING

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reference():
    return load(REFERENCE)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.trained) if name in SLOW else name
                                  for name in PROPERTIES])   # the slow ones train and judge what the training did
def test_the_reference_passes(name, reference):
    verdict = check(name, reference)
    assert verdict.passed, verdict.message


def test_the_shipped_sheet_is_stubs_reported_as_not_implemented():
    sheet = load(ROOT / "exercises" / "capstone2_grpo.py")
    for name in PROPERTIES:
        if name not in SLOW:   # it would build the task first; its stub raises all the same
            assert check(name, sheet).status == NOT_IMPLEMENTED, name


def test_the_sheet_declares_what_the_grader_calls_as_the_reference_defines_it():
    sheet, reference = load(ROOT / "exercises" / "capstone2_grpo.py"), load(REFERENCE)
    for function in ("sample", "completion_logp", "reward", "group_advantages", "grpo_loss", "update", "train"):
        stub, answer = (list(inspect.signature(getattr(m, function)).parameters) for m in (sheet, reference))
        assert answer[:len(stub)] == stub and (function == "train" or answer == stub), function


@pytest.mark.parametrize("label", PLANTED_CAPSTONE2)
def test_a_planted_bug_is_caught_by_its_property(label):
    name = PLANTED_CAPSTONE2[label][0]
    sheet = mutant(label)
    functions = {f: getattr(sheet, f) for f in SPIED}
    verdict = check(name, sheet)
    assert verdict.status == "failed", f"'{label}' passed {name}"
    assert verdict.message.startswith(f"{name}: ") and verdict.message.count("\n") <= 1, verdict.message
    assert NAMED_CAUSE.get(label, "") in verdict.message, verdict.message
    assert all(getattr(sheet, f) is functions[f] for f in SPIED), "a spy was left in the sheet"


def test_enough_planted_bugs_over_enough_properties():
    assert len(PLANTED_CAPSTONE2) >= 10
    assert len({name for name, _, _ in PLANTED_CAPSTONE2.values()}) >= 10
    assert set(WIRING) <= {name for name, _, _ in PLANTED_CAPSTONE2.values()}   # each wiring property catches one
    assert set(NAMED_CAUSE) <= set(PLANTED_CAPSTONE2)


def test_train_learns_short_of_the_mark_names_the_wiring_that_fails():
    """A train that returns the model untouched: accuracy stays near 0.6, and the message names the wiring."""
    sheet = load(REFERENCE)
    sheet.train = lambda model, tokenizer, problems, steps, seed=0: (load_model(), [{}] * steps)
    verdict = check("train_learns", sheet)
    first, second = verdict.message.split("\n")
    assert verdict.status == "failed" and "expected ≥ 0.9" in first, verdict.message
    assert second.startswith("the loop's wiring fails train_calls_the_contract, "), second


def test_the_reference_imports_only_torch_transformers_and_earlier_exercises():
    allowed = re.compile(r"(__future__|copy|random|re|torch(\..*)?|transformers(\..*)?|ex\d\d_\w+)")
    for node in ast.walk(ast.parse(REFERENCE.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            assert all(allowed.fullmatch(n) for n in names), names
