"""GRPO on the tiny preset: a run killed with SIGKILL after a checkpoint and resumed ends exactly
where the uninterrupted run ends (metrics, summary, adapter weights), and the same command gives the
same metrics (deterministic on the CPU)."""

import json
import signal

import held_run
import pytest
from cli_helpers import TINY_GRPO_ARGS as ARGS  # those of tiny_grpo_run, the uninterrupted run here
from cli_helpers import run_cli
from safetensors.torch import load_file

from ladder.runtime.runlog import without_timings
from ladder.tasks import arithmetic


@pytest.fixture(scope="module")
def tiny_math():
    """The shipped tiny model (built into the cache once with LADDER_BUILD_TINY=1), so no run below builds it."""
    return arithmetic.tiny_math_model()


def _metrics(lines):
    return [without_timings(json.loads(line)) for line in lines]


def _summary(out):
    return {k: v for k, v in json.loads((out / "summary.json").read_text()).items() if k != "wall_s"}


def test_sigkill_then_resume_equals_uninterrupted(tmp_path, tiny_math, tiny_grpo_run):
    full, cut = tiny_grpo_run[1], tmp_path / "cut"

    proc = held_run.start([*ARGS, "--out", str(cut)], "checkpoint", tmp_path)  # held once the checkpoint landed
    held = held_run.wait_until_held(proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert held and proc.returncode == -signal.SIGKILL and not (cut / "summary.json").exists()
    # Same seed, same command, another process: the updates up to the checkpoint are the same.
    before_kill = (cut / "metrics.jsonl").read_text().splitlines()[:3]
    assert len(before_kill) == 3 and _metrics(before_kill) == _metrics((full / "metrics.jsonl").open())[:3]

    resumed = run_cli("grpo", "--resume", str(cut), "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _metrics((cut / "metrics.jsonl").open()) == _metrics((full / "metrics.jsonl").open())
    lines = (cut / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 8 and lines[:3] == before_kill  # kept from before the kill, then continued
    assert _summary(cut) == _summary(full)
    assert [step for step, _ in _summary(full)["evals"]] == [0, 3, 6, 8]
    weights, expected = load_file(cut / "adapter" / "adapter_model.safetensors"), load_file(
        full / "adapter" / "adapter_model.safetensors")
    assert weights.keys() == expected.keys() and weights
    for name, tensor in expected.items():
        assert weights[name].equal(tensor), name


@pytest.mark.trained
def test_a_lagging_rollout_and_the_adaptive_coefficient_resume_where_they_were(tmp_path, tiny_math):
    """--max-staleness keeps the last k + 1 copies of the adapter and --adaptive-entropy its c_H: a run killed after
    its first checkpoint and resumed draws each update from the same stale weights and applies the same c_H as the
    run that never stopped (a resume that lost either would draw update 4 from the current weights, or restart c_H)."""
    args = [*ARGS, "--steps", "5", "--eval-every", "0", "--max-staleness", "2", "--sampler-correction",
            "token_truncate", "--adaptive-entropy", "--entropy-coef", "0.01", "--entropy-target", "5"]
    full, cut = tmp_path / "full", tmp_path / "cut"
    done = run_cli(*args, "--out", str(full), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    proc = held_run.start([*args, "--out", str(cut)], "checkpoint", tmp_path)
    held = held_run.wait_until_held(proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert held and not (cut / "summary.json").exists()
    resumed = run_cli("grpo", "--resume", str(cut), "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    got, want = _metrics((cut / "metrics.jsonl").open()), _metrics((full / "metrics.jsonl").open())
    assert got == want and len(want) == 5
    assert [r["sampling/staleness"] for r in want] == [0, 1, 2, 2, 2]
    coefs = [r["entropy_coef"] for r in want]
    assert coefs == sorted(coefs) and coefs[-1] > coefs[0]  # the entropy stays below the target: c_H only grows
