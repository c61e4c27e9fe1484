"""The reward model trains in float32, as TRL's RewardTrainer does, whatever dtype its checkpoint is stored in: a
backbone saved in bfloat16 (as Qwen2.5-0.5B-Instruct is) loads with float32 weights, where transformers' own default
would keep the checkpoint's dtype."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from ladder.policies.reward_model import load_reward_model
from ladder.tasks import sentiment


def test_a_bfloat16_checkpoint_trains_in_float32(tmp_path):
    source = sentiment.tiny_model_path()
    AutoModelForCausalLM.from_pretrained(source).to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    tokenizer = AutoTokenizer.from_pretrained(source)
    stored = AutoModelForSequenceClassification.from_pretrained(tmp_path / "bf16", num_labels=1)
    assert {p.dtype for p in stored.parameters()} == {torch.bfloat16}  # what the library's default gives
    model = load_reward_model(str(tmp_path / "bf16"), tokenizer, torch.device("cpu"))
    assert {p.dtype for p in model.parameters()} == {torch.float32}
