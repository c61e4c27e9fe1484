"""A new rung is one module of ``ladder.rungs``: ``docs/example_rung.py`` (a bandit), as ``ladder.rungs.bandit``, is a
command with the whole run around it — metrics, checkpoints, --resume, summary, curves — through the one training loop;
nothing else lists it (``ladder.rungs.registry``)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch

from ladder import run as ladder_run
from ladder.rungs.protocol import RungCode

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture
def bandit(monkeypatch):
    monkeypatch.syspath_prepend(str(DOCS))
    sys.modules.pop("example_rung", None)
    module = importlib.import_module("example_rung")
    monkeypatch.setitem(sys.modules, "ladder.rungs.bandit", module)  # as if saved as ladder/rungs/bandit.py
    return module


def _records(out: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "wall_s"}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_rung_in_one_file_is_a_command_that_learns(bandit, tmp_path):
    assert isinstance(bandit, RungCode) and bandit.RUNG.name == "bandit"
    out = tmp_path / "run"
    assert ladder_run.main(["bandit", "--steps", "30", "--out", str(out), "--no-progress"]) == 0
    assert [r["step"] for r in _records(out)] == list(range(1, 31))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["p_best_first"] == pytest.approx(1 / 3)     # θ = 0: every arm alike
    assert summary["p_best_last"] > 0.8                        # the best arm's chance is 0.8, the others' 0.5, 0.2
    assert (out / "curves.png").stat().st_size > 0 and (out / "checkpoint.pt").exists()


def test_the_new_rung_resumes_where_it_was_interrupted(bandit, tmp_path, monkeypatch):
    """Interrupted in its 25th update (checkpoints every 10), resumed: the records of the run straight through."""
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    flags = ["--steps", "30", "--checkpoint-every", "10", "--no-progress"]
    assert ladder_run.main(["bandit", *flags, "--out", str(straight)]) == 0
    real, calls = torch.bernoulli, []

    def interrupted_at_the_25th(*args, **kwargs):
        calls.append(1)
        if len(calls) == 25:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "bernoulli", interrupted_at_the_25th)
    assert ladder_run.main(["bandit", *flags, "--out", str(cut)]) == 130
    monkeypatch.setattr(torch, "bernoulli", real)
    assert [r["step"] for r in _records(cut)] == list(range(1, 25))       # logged up to the interruption
    assert ladder_run.main(["bandit", "--resume", str(cut), "--no-progress"]) == 0
    assert _records(cut) == _records(straight)
