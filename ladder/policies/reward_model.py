"""A reward model r_φ(x, y): a language model's backbone with a scalar head, scoring a whole sequence by its last
real token — transformers' ``AutoModelForSequenceClassification`` with ``num_labels=1``, the model TRL's
``RewardTrainer`` trains.

    pair_ids(tokenizer, pair)        the token ids of x + y_w and of x + y_l, as TRL tokenizes them: plain text with
                                     EOS appended (once) to each completion; messages through the chat template
    pair_batch(tokenizer, pairs)     [chosen rows; rejected rows], right-padded ``[2B, L]``, and the attention mask
    rewards(model, ids, mask)        ``[2B]`` r_φ of each row: the head on the last token that is not padding

``core.bradley_terry_loss`` trains it on (r_φ(x, y_w), r_φ(x, y_l)).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ladder.hub import quiet_progress
from ladder.policies.quant import offline_hint


def load_reward_model(model_id: str, tokenizer, device: torch.device, flag: str = "--model") -> nn.Module:
    """``from_pretrained`` with a fresh scalar head (``num_labels=1``) on the model's backbone, its pad token the
    tokenizer's (the head reads the last token that is not one)."""
    from transformers import AutoModelForSequenceClassification

    try:
        with quiet_progress():
            model = AutoModelForSequenceClassification.from_pretrained(model_id, num_labels=1)
    except Exception as e:  # noqa: BLE001
        raise offline_hint(model_id, e, flag) from None
    model.config.pad_token_id = tokenizer.pad_token_id
    return model.to(device)


def pair_ids(tokenizer, pair: dict) -> tuple[list[int], list[int]]:
    """(ids of prompt + chosen, ids of prompt + rejected) for a pair of ``tasks.preference_pairs``."""
    if isinstance(pair["chosen"], str):
        eos = tokenizer.eos_token
        texts = [pair["prompt"] + (c if c.endswith(eos) else c + eos) for c in (pair["chosen"], pair["rejected"])]
        return tuple(tokenizer(text)["input_ids"] for text in texts)
    conversations = (pair["prompt"] + pair["chosen"], pair["prompt"] + pair["rejected"])
    return tuple(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
                 for messages in conversations)


def pair_batch(tokenizer, pairs: list[dict]) -> tuple[Tensor, Tensor]:
    """``[2B, L]`` ids (the B chosen sequences, then the B rejected ones, right-padded) and their attention mask."""
    ids = [pair_ids(tokenizer, pair) for pair in pairs]
    rows = [chosen for chosen, _ in ids] + [rejected for _, rejected in ids]
    width = max(len(row) for row in rows)
    input_ids = torch.tensor([row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows])
    attention_mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows])
    return input_ids, attention_mask


def rewards(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """``[2B]`` r_φ(x, y) of each row (the head on its last token that is not the pad token: under a tokenizer that
    pads with EOS, as GPT-2's, the token before the EOS — as in TRL, whose model this is)."""
    return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits.squeeze(-1).float()
