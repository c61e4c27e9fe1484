"""The benchmarks' own code paths that need no training run: what their default invocation computes first."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def grpo_vs_trl(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports its neighbour ``memory``
    sys.modules.pop("grpo_vs_trl", None)
    return importlib.import_module("grpo_vs_trl")


def test_grpo_vs_trl_names_its_runs_under_the_default_sampler_and_the_others(grpo_vs_trl):
    """Run with no options (``--sampler-dtype same``) the script compares one ladder run with TRL; it once looked the
    default up in the table of the other dtypes' short names and stopped with a KeyError before any run."""
    assert grpo_vs_trl.run_names("same") == ["ladder"]
    assert grpo_vs_trl.run_names("bfloat16") == ["ladder", "ladder-bf16"]
    assert grpo_vs_trl.run_names("float16") == ["ladder", "ladder-fp16"]
    assert grpo_vs_trl.run_names("bfloat16", with_generate=True) == ["ladder", "ladder-generate", "ladder-bf16"]
