"""Every rung implements ``ladder.rungs.protocol.RungCode`` and declares itself (``Rung``); the command line, the
graders and the doctor read a rung through its declaration alone."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import pytest

from ladder import run
from ladder.doctor import vitals
from ladder.graders import EXERCISES
from ladder.options import Checked
from ladder.rungs import protocol, registry
from ladder.runtime.runlog import UsageError
from ladder.specs import option_names

RUNGS = registry.rungs()
MEMBERS = ("RUNG", "Config", "PRESETS", "ALGOS", "RESOLVED", "validate", "train")


def test_the_rungs_are_the_modules_that_declare_themselves_in_their_order():
    assert list(RUNGS) == ["reinforce", "cartpole", "ppo-sentiment", "grpo", "agent", "reward-model", "dpo", "distill",
                           "eval"]
    assert all(registry.find(name) is module for name, module in RUNGS.items())
    with pytest.raises(UsageError, match="unknown rung 'nope'; choose one of: reinforce, cartpole"):
        registry.find("nope")


@pytest.mark.parametrize("name", list(RUNGS))
def test_every_rung_declares_every_member_of_the_protocol(name):
    rung = RUNGS[name]
    assert isinstance(rung, protocol.RungCode)
    assert rung.RUNG.name == name and isinstance(rung.RUNG.writes, str) and rung.RUNG.writes
    assert dataclasses.is_dataclass(rung.Config) and issubclass(rung.Config, Checked)
    options = set(option_names(rung.Config))  # a spec's fields by their flags
    for bundle in [*rung.PRESETS.values(), *rung.ALGOS.values()]:
        assert set(bundle) <= options
    assert set(rung.RESOLVED) <= options and all(callable(rule) for rule in rung.RESOLVED.values())
    assert all(callable(part) for part in (rung.validate, rung.train))
    assert set(rung.RUNG.vitals) <= set(vitals.VITALS)
    assert set(rung.RUNG.exercises) <= {e.stem for e in EXERCISES}
    assert ("export_trl" in options) == (rung.RUNG.export is not None)  # --export-trl exactly where it exports


def test_a_module_missing_a_member_is_not_a_rung():
    complete = {member: getattr(RUNGS["cartpole"], member) for member in MEMBERS}
    assert isinstance(types.SimpleNamespace(**complete), protocol.RungCode)
    for member in complete:
        assert not isinstance(types.SimpleNamespace(**{k: v for k, v in complete.items() if k != member}),
                              protocol.RungCode), member


def test_the_command_line_names_no_rung_and_guesses_no_member():
    source = (Path(run.__file__)).read_text(encoding="utf-8")
    assert "getattr(rung" not in source and "hasattr(rung" not in source
    assert 'name == "grpo"' not in source and '"cartpole"' not in source


def test_the_help_lists_every_rung_from_its_declaration():
    shown = run.usage()
    for name, module in RUNGS.items():
        assert f"    {name:14s} {module.RUNG.summary}" in shown


def test_grpo_exports_only_with_export_trl(tmp_path):
    grpo = RUNGS["grpo"]
    assert run.exported(grpo, grpo.Config()) is None
    target = tmp_path / "s.py"
    summary = run.exported(grpo, grpo.Config(**grpo.PRESETS["tiny"], export_trl=str(target), out=str(tmp_path / "r")))
    assert summary["export_trl"] == str(target) and target.is_file() and not (tmp_path / "r").exists()


UNEVEN = {  # a batch of 15 rows in 4 minibatches: each rung's own words for its batch, one check
    "cartpole": ({"num_envs": 3, "num_steps": 5, "num_minibatches": 4}, "a batch of 3×5 transitions"),
    "ppo-sentiment": ({"batch_size": 15, "num_minibatches": 4}, "a batch of 15 completions"),
    "grpo": ({"prompts_per_step": 5, "group_size": 3, "num_minibatches": 4}, "5 prompts × 3 completions"),
}


@pytest.mark.parametrize("name", list(UNEVEN))
def test_every_minibatch_rule_is_the_one_check(name):
    options, batch = UNEVEN[name]
    with pytest.raises(UsageError) as refused:
        RUNGS[name].validate(RUNGS[name].Config(**options))
    assert str(refused.value) == f"{batch} cannot be split into 4 equal minibatches"
    with pytest.raises(UsageError) as direct:
        protocol.check_minibatches(15, 4, batch)
    assert str(direct.value) == str(refused.value)
    even = {**options, "num_minibatches": 3 if name != "grpo" else 5}
    RUNGS[name].validate(RUNGS[name].Config(**even))  # 15 rows split into 3 (or 5): accepted
