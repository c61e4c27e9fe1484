"""The reward model trains in float32, as TRL's RewardTrainer does, whatever dtype its checkpoint is stored in: a
backbone saved in bfloat16 (as Qwen2.5-0.5B-Instruct is) loads with float32 weights, where transformers' own default
would keep the checkpoint's dtype."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from ladder.policies.scalar_head import load_reward_model
from ladder.tasks import review_models


def test_a_bfloat16_checkpoint_trains_in_float32(tmp_path):
    source = review_models.tiny_model_path()
    AutoModelForCausalLM.from_pretrained(source).to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    tokenizer = AutoTokenizer.from_pretrained(source)
    stored = AutoModelForSequenceClassification.from_pretrained(tmp_path / "bf16", num_labels=1)
    assert {p.dtype for p in stored.parameters()} == {torch.bfloat16}  # what the library's default gives
    model = load_reward_model(str(tmp_path / "bf16"), tokenizer, torch.device("cpu"))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_the_run_records_its_dtype_and_dtype_asks_for_another(tmp_path):
    import json

    from cli_helpers import run_cli

    small = ("--preset", "tiny", "--steps", "1", "--batch-size", "4", "--eval-pairs", "4", "--no-progress")
    out = tmp_path / "bf16"    # float32, the default, is recorded by notebook 9's run (test_rung_preferences)
    done = run_cli("reward-model", *small, "--dtype", "bfloat16", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "summary.json").read_text())["dtype"] == "bfloat16"
    done = run_cli("reward-model", *small, "--dtype", "float16", "--out", str(tmp_path / "f16"), cwd=tmp_path)
    assert done.returncode == 2 and "--dtype" in done.stderr and not (tmp_path / "f16").exists()
    script = tmp_path / "rm_trl.py"
    done = run_cli("reward-model", *small, "--dtype", "bfloat16", "--export-trl", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "'dtype': 'bfloat16'" in script.read_text() or '"dtype": "bfloat16"' in script.read_text()


def test_a_text_longer_than_the_models_positions_is_scored_on_its_last_ones(tmp_path):
    """A policy gone wild writes what re-tokenises past the reward model's positions: scored, not an IndexError."""
    from ladder.policies.scalar_head import LearnedReward

    source = review_models.tiny_model_path()
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = load_reward_model(source, tokenizer, torch.device("cpu"))
    reward = LearnedReward(model, tokenizer)
    limit = model.config.max_position_embeddings
    long = "great " * (2 * limit)
    tail = tokenizer.decode(tokenizer(long + tokenizer.eos_token)["input_ids"][-limit:-1])
    short = "a great film"
    scores = reward([long, short])
    assert torch.isfinite(scores).all()
    assert scores[0] == pytest.approx(reward([tail])[0].item(), abs=1e-4)
    assert scores[1] == pytest.approx(reward([short])[0].item(), abs=1e-5)   # short texts unchanged
