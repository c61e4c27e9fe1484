"""The preference rungs on the tiny preference task, offline on a CPU: ``reward-model`` fits r_φ by Bradley–Terry and
``dpo`` fits π_θ by DPO, both through the one ``core.update`` with each pair kept whole; ppo-sentiment then loads
the trained r_φ as its reward. The trained-number margins are wide (checked under cpu-variants)."""

from __future__ import annotations

import json
import sys

import pytest
import torch

import ladder.core
from ladder import run
from ladder.tasks import sentiment_rewards
from ladder.viz import preference_lab

pytestmark = pytest.mark.notebook_runs  # reads runs a notebook makes (run right after the notebooks)


@pytest.fixture
def spy_update(monkeypatch):
    """Every core.update call's objective and batch; the real update is what runs."""
    calls, real = [], ladder.core.update

    def spy(policy, batch, optimizer, cfg, *args, **kwargs):
        calls.append((cfg.objective, batch))
        return real(policy, batch, optimizer, cfg, *args, **kwargs)

    monkeypatch.setattr(ladder.core, "update", spy)
    return calls, real


def _run(rung: str, out, *flags) -> dict:
    assert run.main([rung, "--preset", "tiny", "--out", str(out), "--no-progress", *flags]) == 0
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def reward_model_run(tmp_path_factory):
    """Notebook 9's reward model (120 updates, evaluated every 20): made once, by the notebook or here."""
    out = tmp_path_factory.mktemp("rm") / "run"
    return out, preference_lab.reward_model_run(out)[0]


@pytest.mark.trained
def test_the_reward_model_learns_the_labellers_order_and_its_length_pull(reward_model_run):
    out, summary = reward_model_run
    before, after = summary["eval_before"], summary["eval_after"]
    assert after["eval_accuracy"] > 0.72 and after["eval_accuracy"] > before["eval_accuracy"] + 0.2
    assert after["eval_score_accuracy"] > 0.62        # the true order too, less well: the labeller is not the truth
    assert after["eval_length_corr"] > 0.25           # the labeller's pull towards length, learned
    assert after["eval_calibration_error"] < 0.1 and summary["calibration"]
    assert summary["dtype"] == "float32"              # TRL's RewardTrainer's, whatever the checkpoint's dtype
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 121)) and "eval_accuracy" in records[19]


def test_both_rungs_call_the_one_update_with_pairs_kept_whole(spy_update, tmp_path):
    calls, real = spy_update
    _run("reward-model", tmp_path / "rm", "--steps", "1", "--batch-size", "4", "--eval-pairs", "4")
    _run("dpo", tmp_path / "dpo", "--steps", "1", "--batch-size", "4", "--eval-pairs", "4",
         "--num-eval-prompts", "2", "--max-new-tokens", "4")
    (rm_objective, rm_batch), (dpo_objective, dpo_batch) = calls
    assert real is sys.modules["ladder.core.update"].update
    assert rm_objective == "bradley_terry" and isinstance(dpo_objective, ladder.core.DPO)
    assert rm_batch.rows_per_group == dpo_batch.rows_per_group == 2
    assert rm_batch.actions.shape == (8, 1) and len(dpo_batch) == 8 and dpo_batch.ref_logp is not None
    same_prompt = dpo_batch.inputs["input_ids"][0::2, :-dpo_batch.actions.shape[1]]
    assert torch.equal(same_prompt, dpo_batch.inputs["input_ids"][1::2, :-dpo_batch.actions.shape[1]])


@pytest.mark.trained
def test_dpo_ranks_held_out_pairs_and_moves_away_from_the_reference(tmp_path):
    summary, records = preference_lab.dpo_run(tmp_path / "dpo")  # notebook 9's: β = 0.1, 120 updates, every 40
    before, after = summary["eval_before"], summary["eval_after"]
    assert before["sample_kl"] == pytest.approx(0.0, abs=1e-4) and before["eval_margin"] == pytest.approx(0, abs=1e-4)
    assert after["eval_accuracy"] > 0.65 and after["eval_margin"] > 0.1
    assert after["sample_kl"] > 0.5
    assert after["true_reward_mean"] > before["true_reward_mean"] + 0.2
    assert (tmp_path / "dpo" / "policy" / "config.json").exists()
    # What notebook 9's section 5 shows on this run: likelihood displacement and longer completions.
    moved = preference_lab.displacement(records)
    assert moved["rewards/chosen"][1] < -0.1 and moved["rewards/margins"][1] > moved["rewards/margins"][0] + 0.2
    assert moved["logps/chosen"][1] < moved["logps/chosen"][0]
    assert after["response_length"] > before["response_length"] + 2
    assert {"words_mean", "hedged_share", "padded_share"} <= after.keys()


@pytest.mark.trained
def test_ppo_sentiment_trains_against_the_learned_reward_model(reward_model_run, tmp_path):
    out, _ = reward_model_run
    learned = sentiment_rewards.load_reward(str(out / "reward_model"))
    assert learned.name == "r_φ"
    good, bad = learned(["This movie was wonderful and I loved it.", "This movie was awful and I hated it."])
    assert good > bad
    summary = _run("ppo-sentiment", tmp_path / "ppo", "--reward-model", str(out / "reward_model"),
                   "--true-reward", "tiny-preferences", "--steps", "2", "--batch-size", "8", "--num-eval-prompts", "2")
    records = [json.loads(line) for line in (tmp_path / "ppo" / "metrics.jsonl").read_text().splitlines()]
    assert summary["reward_model"] == str(out / "reward_model")
    assert all("true_reward_mean" in r and "score_mean" in r for r in records)


def test_a_lora_reward_model_is_saved_whole_for_ppo_to_load(tmp_path):
    """With --lora the adapters are merged into the backbone: OUT/reward_model is one model ppo-sentiment can load."""
    _run("reward-model", tmp_path / "rm", "--lora", "--steps", "2", "--batch-size", "4", "--eval-pairs", "4")
    saved = tmp_path / "rm" / "reward_model"
    assert not (saved / "adapter_config.json").exists()
    scores = sentiment_rewards.load_reward(str(saved))(["This movie was great.", "This movie was awful."])
    assert scores.shape == (2,) and torch.isfinite(scores).all()


def _records_without_time(out) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "wall_s"}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("rung", ["dpo", "reward-model"])
def test_a_preference_run_resumes_where_it_was_interrupted(rung, tmp_path, monkeypatch):
    """Interrupted in its 5th update (checkpoints every 2), resumed: the records of the run straight through, and its
    summary's evaluation before the first update (kept in the checkpoint)."""
    flags = ["--steps", "6", "--checkpoint-every", "2", "--batch-size", "4", "--eval-every", "3", "--eval-pairs", "8"]
    if rung == "dpo":
        flags += ["--num-eval-prompts", "2", "--max-new-tokens", "6"]
    _run(rung, tmp_path / "straight", *flags)
    real, calls = ladder.core.update, []

    def interrupted_at_the_5th(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ladder.core, "update", interrupted_at_the_5th)
    cut = tmp_path / "cut"
    assert run.main([rung, "--preset", "tiny", "--out", str(cut), "--no-progress", *flags]) == 130
    monkeypatch.setattr(ladder.core, "update", real)
    assert [r["step"] for r in _records_without_time(cut)] == [1, 2, 3, 4]
    assert run.main([rung, "--resume", str(cut), "--no-progress"]) == 0
    straight, resumed = _records_without_time(tmp_path / "straight"), _records_without_time(cut)
    assert [r["step"] for r in resumed] == list(range(1, 7))
    for a, b in zip(resumed, straight):
        assert a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=1e-5, abs=1e-6) for k in a)
    before = [json.loads((d / "summary.json").read_text())["eval_before"] for d in (cut, tmp_path / "straight")]
    assert before[0] and before[0] == pytest.approx(before[1], rel=1e-5, abs=1e-6)


def test_a_finished_preference_run_prints_its_held_out_results(tmp_path, capsys):
    capsys.readouterr()
    _run("reward-model", tmp_path / "rm", "--steps", "1", "--batch-size", "4", "--eval-pairs", "4")
    out = capsys.readouterr().out
    printed = json.loads(out[out.index("{"):out.rindex("}") + 1])
    summary = json.loads((tmp_path / "rm" / "summary.json").read_text())
    for name in ("eval_accuracy", "eval_margin", "eval_calibration_error"):
        assert printed[f"eval_after.{name}"] == summary["eval_after"][name]
        assert printed[f"eval_before.{name}"] == summary["eval_before"][name]
    assert "calibration" not in printed  # a table: it stays in summary.json
