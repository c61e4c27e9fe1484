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


@pytest.fixture
def decode_floor(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports its neighbour ``grpo_vs_trl``
    sys.modules.pop("decode_floor", None)
    return importlib.import_module("decode_floor")


def test_the_floor_runs_the_forwards_a_sampler_of_n_tokens_runs(decode_floor):
    """The floor is the model's own work for n new tokens: one prefill, then n − 1 forwards of one token per row
    over the cache — what ``policies.decode`` runs, without drawing."""
    import torch

    from ladder.policies import quant
    from ladder.tasks import arithmetic, math_problems

    path = math_problems.resolve_math_model("@tiny-math")
    tokenizer, model = quant.load_tokenizer(path), quant.load_causal_lm(path, torch.device("cpu")).eval()
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, q, "Solve it.") for q in ("1+1", "12*3")], return_tensors="pt",
                    padding=True)
    widths = []
    model.register_forward_pre_hook(lambda m, a, kw: widths.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    ids, mask = enc.input_ids.repeat_interleave(3, 0), enc.attention_mask.repeat_interleave(3, 0)
    decode_floor.forwards_alone(model, ids, mask, new_tokens=5)
    assert widths == [(2, enc.input_ids.shape[1])] + [(6, 1)] * 4  # each distinct prompt once, then 6 rows


def test_the_floor_reports_each_way_against_trls_median(decode_floor, capsys):
    decode_floor.report({"forwards alone": lambda: None, "TRL": lambda: sum(range(10**5))}, repeats=3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# sampling floor on CPU") and "load average" in lines[1]
    assert lines[-1].startswith("TRL") and lines[-1].endswith("/ TRL's median 1.00x")
    assert lines[-2].startswith("forwards alone")
