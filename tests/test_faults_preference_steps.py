"""A preference run whose every step is non-finite (a model with a NaN weight, as a broken checkpoint brings):
the guard skips each step and counts it, like any other rung's, and stops the run in one line after
``--max-nonfinite-updates`` such updates in a row — no KeyError on the statistics a skipped step lacks."""

from __future__ import annotations

import json
import signal

import pytest
import torch
from cli_helpers import run_cli
from transformers import AutoModelForCausalLM, AutoTokenizer

from ladder.tasks import review_models


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory):
    """The tiny review GPT-2 with one NaN in its last layer norm: every forward is NaN."""
    path = tmp_path_factory.mktemp("nan") / "model"
    source = review_models.tiny_model_path()
    model = AutoModelForCausalLM.from_pretrained(source)
    with torch.no_grad():
        model.transformer.ln_f.weight[0] = float("nan")
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(source).save_pretrained(path)
    return path


@pytest.mark.parametrize("rung", ["dpo", "reward-model"])
def test_a_run_of_non_finite_steps_is_counted_and_stopped_in_one_line(rung, nan_model, tmp_path):
    out = tmp_path / "run"
    extra = ["--num-eval-prompts", "0"] if rung == "dpo" else []
    result = run_cli(rung, "--model", str(nan_model), "--dataset", "tiny", "--steps", "6", "--batch-size", "4",
                     "--eval-pairs", "0", "--eval-every", "100", "--max-nonfinite-updates", "3", "--threads", "1",
                     "--no-progress", "--out", str(out), *extra, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and "3 updates in a row" in lines[0], result.stderr
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["skipped_steps"] for r in records] == [1.0, 1.0]  # the third stops the run before its record
    assert all("grad_norm" not in r for r in records)


def test_every_artefact_a_rung_writes_is_set_aside_by_overwrite():
    """``--overwrite`` sets aside the run files it knows (``RUN_FILES``): every file and folder a rung says it writes
    is one of them, so no old artefact stays beside the new run."""
    from ladder.rungs import registry
    from ladder.runtime.runlog import RUN_FILES

    for name, rung in registry.rungs().items():
        written = [part.strip().rstrip("/") for part in rung.RUNG.writes.split(",")]
        assert set(written) <= set(RUN_FILES), (name, sorted(set(written) - set(RUN_FILES)))


def test_overwrite_interrupted_leaves_no_old_reward_model_that_ppo_reads(tmp_path):
    """The case as a user meets it: ``reward-model --out rm`` finishes; the same with ``--seed 1 --overwrite`` is
    interrupted (SIGINT) after its first record. rm/ then holds the new, unfinished run and no reward_model/ (the
    old one was set aside with its run and discarded once the new one trained): ppo-sentiment refuses it in one
    line."""
    import held_run

    rm = tmp_path / "rm"
    args = ["reward-model", "--preset", "tiny", "--steps", "2", "--eval-pairs", "8", "--eval-every", "100",
            "--no-progress", "--out", str(rm)]
    first = run_cli(*args, cwd=tmp_path)
    assert first.returncode == 0 and (rm / "reward_model").is_dir(), first.stderr[-2000:]
    with held_run.held([*args, "--steps", "50", "--seed", "1", "--overwrite"], "log", tmp_path) as proc:
        assert held_run.wait_until_held(proc)
        assert held_run.stop(proc, signal.SIGINT).returncode == 130
    assert not (rm / "summary.json").exists() and not (rm / "reward_model").exists()
    (rm / "reward_model").mkdir()  # even a reward_model/ put there by hand is not this unfinished run's
    ppo = run_cli("ppo-sentiment", "--preset", "tiny", "--reward-model", str(rm / "reward_model"), "--out",
                  str(tmp_path / "ppo"), cwd=tmp_path)
    assert ppo.returncode == 2 and "Traceback" not in ppo.stderr, ppo.stderr[-2000:]
    assert len(ppo.stderr.strip().splitlines()) == 1 and "has not finished" in ppo.stderr
    assert not (tmp_path / "ppo").exists()


def test_a_reward_model_beside_an_unfinished_run_is_refused(tmp_path):
    """``reward-model --out rm`` finished, then ``--seed 1 --overwrite`` interrupted: rm/ holds the new, unfinished run
    and no reward model (the old one was set aside with its run); a reward_model/ that a run directory holds before
    its summary.json is refused in one line by ppo-sentiment."""
    from ladder.runtime.runlog import UsageError
    from ladder.tasks.sentiment_rewards import refuse_an_unfinished_runs_model

    run_dir = tmp_path / "rm"
    (run_dir / "reward_model").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"rung": "reward-model"}))
    with pytest.raises(UsageError, match="has not finished"):
        refuse_an_unfinished_runs_model(str(run_dir / "reward_model"), "--reward-model")
    (run_dir / "summary.json").write_text("{}")
    refuse_an_unfinished_runs_model(str(run_dir / "reward_model"), "--reward-model")
