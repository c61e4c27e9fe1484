"""A new objective is one file (``tests/toy_objective.py``): registered there, it is a ``--loss-type`` with a flag, a
domain, a refusal, a TRL row that says TRL has no equivalent, and it trains through ``core.update`` — with no other
module touched. Each check runs in a process of its own, so the registration does not reach the other tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _ladder(argv: list[str], tmp_path: Path, then: str = "") -> subprocess.CompletedProcess:
    """``python -m ladder.run ARGV`` in a process that imported the toy objective first (and runs ``then``)."""
    code = ("import sys, toy_objective\nfrom ladder.run import main\n"
            f"rc = main({argv!r})\n{then}\nsys.exit(rc)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


TOY = ["grpo", "--preset", "tiny", "--loss-type", "toy"]


def test_the_toy_is_a_loss_type_with_its_flag_and_help(tmp_path):
    shown = _ladder([*TOY, "--toy-scale", "2", "--print-config"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    options = json.loads(shown.stdout)
    assert options["loss_type"] == "toy" and options["toy_scale"] == 2.0
    assert "delta" not in options  # the clipped objective's flag: not this run's
    helped = _ladder(["grpo", "--help"], tmp_path)
    assert "--toy-scale TOY_SCALE" in helped.stdout and "toy (−s·ρ·Â" in " ".join(helped.stdout.split())
    assert "(default: 1.0)" in " ".join(helped.stdout.split("--toy-scale TOY_SCALE")[-1].split()[:20])


@pytest.mark.parametrize("argv, line", [
    ([*TOY, "--toy-scale", "0"], "ladder: error: --toy-scale must be positive, got 0.0"),
    (["grpo", "--preset", "tiny", "--toy-scale", "2"],
     "ladder: error: --toy-scale has no effect without --loss-type toy"),
    ([*TOY, "--delta", "1.5"],
     "ladder: error: --delta caps the clipped surrogate's ratio; --loss-type toy has no clip"),
])
def test_its_flag_is_checked_and_refused_elsewhere(argv, line, tmp_path):
    refused = _ladder([*argv, "--print-config"], tmp_path)
    assert refused.returncode == 2 and refused.stderr.strip() == line, refused.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_trl_map_says_trl_has_no_equivalent(tmp_path):
    script = tmp_path / "toy_trl.py"
    wrote = _ladder([*TOY, "--toy-scale", "2", "--export-trl", str(script)], tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    text = script.read_text()
    assert "loss_type=" not in text  # TRL has no "toy": the script leaves its default and says so
    used = text.split("# Used by this run, and GRPOTrainer has no equivalent:")[1].split("# ladder options with")[0]
    assert "--toy-scale = 2.0: GRPOTrainer has no toy loss" in " ".join(used.replace("#", " ").split())
    assert "--loss-type = 'toy': a loss type GRPOTrainer does not have" in " ".join(used.replace("#", " ").split())


def test_it_trains_through_core_update(tmp_path):
    then = ("from ladder import run\nfrom ladder.rungs import grpo\n"
            f"print('UPDATE', grpo.update_config(run.make_config('grpo', grpo, {[*TOY[1:], '--toy-scale', '2']!r})))")
    trained = _ladder([*TOY, "--toy-scale", "2", "--steps", "2", "--eval-every", "0", "--eval-size", "8",
                       "--out", "run", "--no-progress"], tmp_path, then)
    assert trained.returncode == 0, trained.stderr
    assert "objective=ScaledRatio(scale=2.0)" in trained.stdout and "aggregation='token_mean'" in trained.stdout
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(abs(r["loss"]) < 1e6 for r in records)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["toy_scale"] == 2.0
