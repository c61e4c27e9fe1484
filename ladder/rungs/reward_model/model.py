"""r_φ, the reward model: loaded with its tokenizer and the training and held-out pairs (``load``), and the scores
r_φ(x, y_w), r_φ(x, y_l) of pairs (``score_pairs``)."""

from __future__ import annotations

import torch

from ladder import hub
from ladder.policies import quant
from ladder.policies.causal_lm import disable_dropout
from ladder.policies.scalar_head import load_reward_model, preference_batch, rewards
from ladder.rungs.reward_model.options import Config
from ladder.tasks import preference_pairs, review_models


def load(cfg: Config):
    """(tokenizer, reward model, training pairs, held-out pairs); a loading problem is one line, and so is a pair the
    model cannot take (``policies.dpo_batch.check_pairs``: checked before any weights load)."""
    from ladder.policies.dpo_batch import check_pairs

    path = hub.resolve(review_models.resolve_review_model(cfg.model), "--model")
    tokenizer, config = quant.load_tokenizer(path), quant.load_config(path)
    train_pairs, held_out = preference_pairs.train_and_held_out(
        cfg.dataset, cfg.eval_pairs, cfg.max_pairs or None,
        check=lambda train, test: check_pairs(tokenizer, config, train + test, cfg.dataset, cfg.model))
    model = load_reward_model(path, tokenizer, torch.device(cfg.device), lora=cfg.lora, lora_r=cfg.lora_r,
                              lora_alpha=cfg.lora_alpha, dtype=getattr(torch, cfg.dtype))
    disable_dropout(model)
    return tokenizer, model, train_pairs, held_out


@torch.no_grad()
def score_pairs(model, tokenizer, pairs: list[dict], rows: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``[P]`` r_φ(x, y_w) and ``[P]`` r_φ(x, y_l) of ``pairs``, ``rows`` pairs per forward."""
    chosen, rejected = [], []
    for start in range(0, len(pairs), rows):
        batch = preference_batch(tokenizer, pairs[start:start + rows], device)
        r = rewards(model, batch.inputs["input_ids"], batch.inputs["attention_mask"]).cpu()
        chosen.append(r[0::2])
        rejected.append(r[1::2])
    return torch.cat(chosen), torch.cat(rejected)
