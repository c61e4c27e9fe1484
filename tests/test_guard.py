"""The non-finite guard (``ladder.runtime.session.NonFiniteGuard``): an update whose every step was skipped counts,
and after N such updates in a row the run stops in one line, having warned once (CartPole as the rung that runs)."""

import json
import sys

import pytest

from ladder.rungs import cartpole


def test_non_finite_losses_warn_once_then_stop_the_run(tmp_path, monkeypatch, capsys):
    """Every loss NaN: weights untouched, one warning, and a one-line stop after N updates in a row."""
    from ladder import run

    update_module = sys.modules["ladder.core.update"]
    real = update_module.compute_loss

    def nan_loss(*args, **kwargs):
        loss, stats, tensors = real(*args, **kwargs)
        return loss * float("nan"), stats, tensors

    monkeypatch.setattr(update_module, "compute_loss", nan_loss)
    out = tmp_path / "run"
    code = run.main(["cartpole", "--out", str(out), "--total-steps", "100000", "--max-nonfinite-updates", "3",
                     "--checkpoint-every", "1", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out.count("non-finite") == 1  # warned once
    assert len(captured.err.strip().splitlines()) == 1 and "3 updates in a row" in captured.err
    records = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert len(records) == 2 and all(r["skipped_steps"] == 15 for r in records)  # μ = 15 passes, 1 minibatch
    initial = cartpole.recipe.MLPActorCritic if hasattr(cartpole.recipe, "MLPActorCritic") else None
    assert initial is None or (out / "checkpoint.pt").exists()


def test_guard_counts_only_updates_whose_every_step_was_skipped():
    from ladder.runtime.runlog import RunStopped
    from ladder.runtime.session import NonFiniteGuard

    warnings = []
    guard = NonFiniteGuard(patience=2, out="x", warn=warnings.append)
    guard(0.0, 2)
    guard(3.0, 4)  # one step of the four got through
    guard(2.0, 2)
    guard(5.0, None)  # an update without optimiser steps is not counted
    with pytest.raises(RunStopped, match="2 updates in a row"):
        guard(2.0, 2)
    assert len(warnings) == 1


def test_rewards_too_large_to_average_end_the_run_with_a_summary_not_a_traceback(tmp_path):
    """Rewards of 2e38 (float32's largest is 3.4e38): their mean overflows, the record logs it as null, and the
    summary says None instead of failing to average it."""
    from ladder import run

    out = tmp_path / "run"
    code = run.main(["grpo", "--preset", "tiny", "--steps", "2", "--eval-size", "4", "--print-samples", "0",
                     "--reward-weights", "2e38,2e38", "--scale-rewards", "none", "--out", str(out), "--no-progress"])
    assert code == 0
    records = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert len(records) == 2 and all(r["reward"] is None for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reward_first5"] is None and summary["reward_last5"] is None
