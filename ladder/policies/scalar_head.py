"""A reward model r_φ(x, y): a language model's backbone with a scalar head, scoring a whole sequence by its last
real token — transformers' ``AutoModelForSequenceClassification`` with ``num_labels=1``, the model TRL's
``RewardTrainer`` trains.

    pair_ids(tokenizer, pair)        the token ids of x + y_w and of x + y_l, as TRL tokenizes them: plain text with
                                     EOS appended (once) to each completion; messages through the chat template
    pair_batch(tokenizer, pairs)     [chosen rows; rejected rows], right-padded ``[2B, L]``, and the attention mask
    rewards(model, ids, mask)        ``[2B]`` r_φ of each row: the head on the last token that is not padding
    preference_batch(tokenizer, pairs)   the ``core.Batch`` of the pairs for ``core.update``: ``[2B, 1]``, row 2i
                                     pair i's chosen and 2i + 1 its rejected (``rows_per_group`` 2), one decision per
                                     row — the whole sequence's score
    ScoringPolicy(model)             the reward model as ``core.update`` calls a policy: ``evaluate`` returns
                                     r_φ in the log-prob's place, which the Bradley–Terry objective reads
    load_classifier(path, name)      a trained scorer (r_φ, or a sentiment classifier) to score with: a model of
                                     another kind is one line before its weights load

``core.update`` with the objective ``"bradley_terry"`` trains it on (r_φ(x, y_w), r_φ(x, y_l)).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ladder.core import Batch
from ladder.hub import quiet_progress
from ladder.policies.dpo_batch import padded
from ladder.policies.quant import lora_config, offline_hint
from ladder.runtime.errors import UsageError


def load_reward_model(model_id: str, tokenizer, device: torch.device, flag: str = "--model", lora: bool = False,
                      lora_r: int = 16, lora_alpha: int = 32, dtype: torch.dtype = torch.float32) -> nn.Module:
    """``from_pretrained`` with a fresh scalar head (``num_labels=1``) on the model's backbone, its pad token the
    tokenizer's (the head reads the last token that is not one); with ``lora``, LoRA adapters on the backbone and
    the head trained whole. In ``dtype`` whatever dtype the checkpoint is stored in (Qwen2.5-0.5B-Instruct's is
    bfloat16): float32 by default, as TRL's RewardTrainer trains it."""
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # not the load report's "score.weight MISSING": a new head is the point
    try:
        with quiet_progress():
            model = AutoModelForSequenceClassification.from_pretrained(model_id, num_labels=1, dtype=dtype)
    except Exception as e:  # noqa: BLE001
        raise offline_hint(model_id, e, flag) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    model.config.pad_token_id = tokenizer.pad_token_id
    if lora:
        from peft import get_peft_model

        conv1d = any(type(m).__name__ == "Conv1D" for m in model.modules())  # GPT-2's transposed linear layers
        model = get_peft_model(model, lora_config(lora_r, lora_alpha, fan_in_fan_out=conv1d, task_type="SEQ_CLS"))
    return model.to(device)


def load_classifier(path: str, name: str, flag: str = "--reward-model") -> nn.Module:
    """A sequence classifier to score with (a reward model this package's ``reward-model`` rung saved, TRL's, or a
    sentiment classifier): its config read first, so that a model of another kind (a causal LM's directory, say) is
    one line before any weight loads; transformers' load report kept quiet (it would precede a one-line error)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    config = AutoConfig.from_pretrained(path)
    architectures = list(getattr(config, "architectures", None) or [])
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise UsageError(f"{flag} {name} is a {architectures[0]}, not a sequence classifier: pass a reward model "
                         f"(OUT/reward_model of the reward-model rung) or a sentiment classifier")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with quiet_progress():
            return AutoModelForSequenceClassification.from_pretrained(path, config=config)
    finally:
        hf_logging.set_verbosity(verbosity)


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
    return padded([chosen for chosen, _ in ids] + [rejected for _, rejected in ids], tokenizer.pad_token_id, left=False)


def rewards(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """``[2B]`` r_φ(x, y) of each row (the head on its last token that is not the pad token: under a tokenizer that
    pads with EOS, as GPT-2's, the token before the EOS — as in TRL, whose model this is)."""
    return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits.squeeze(-1).float()


def preference_batch(tokenizer, pairs: list[dict], device: torch.device | str = "cpu") -> Batch:
    """The pairs as ``core.update`` takes them: ``[2B, 1]`` (one score per row), row 2i the chosen sequence of pair
    i and row 2i + 1 its rejected one, each pair kept whole by minibatching (``rows_per_group`` 2); the sequences
    themselves in ``inputs`` (right-padded ids and attention mask, ``pair_batch``'s rows interleaved)."""
    input_ids, attention_mask = pair_batch(tokenizer, pairs)
    B = len(pairs)
    order = torch.stack([torch.arange(B), torch.arange(B) + B], dim=1).reshape(-1)  # w_1, l_1, w_2, l_2, …
    rows = 2 * B
    return Batch(actions=torch.zeros(rows, 1, dtype=torch.long, device=device), mask=torch.ones(rows, 1, device=device),
                 advantages=torch.zeros(rows, 1, device=device), rows_per_group=2,
                 inputs={"input_ids": input_ids[order].to(device), "attention_mask": attention_mask[order].to(device)})


class ScoringPolicy(nn.Module):
    """A reward model as ``core.update`` calls a policy: ``evaluate(batch)`` → (r_φ ``[B, 1]``, None, None), the
    score in the log-prob's place (the Bradley–Terry objective reads it as the row's score)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def evaluate(self, batch: Batch) -> tuple[Tensor, None, None]:
        return rewards(self.model, batch.inputs["input_ids"], batch.inputs["attention_mask"])[:, None], None, None

    def forward(self, batch: Batch) -> tuple[Tensor, None, None]:
        return self.evaluate(batch)


class LearnedReward:
    """A reward model this rung's ``reward-model`` trained (one label), as a reward function: texts → ``[N]`` r_φ,
    each text scored as it was trained — plain text with EOS appended once — without gradients. A text longer than the
    model's positions (``max_position_embeddings``) is scored on its last ones, the EOS the head reads kept."""

    def __init__(self, model: nn.Module, tokenizer, batch_size: int = 16, device: str = "cpu"):
        self.model = model.to(device).eval().requires_grad_(False)
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.device = device
        self.name = "r_φ"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "right"
        tokenizer.truncation_side = "left"
        model.config.pad_token_id = tokenizer.pad_token_id
        self.limit = getattr(model.config, "max_position_embeddings", None)

    @torch.no_grad()
    def __call__(self, texts) -> Tensor:
        eos = self.tokenizer.eos_token
        scores = []
        for start in range(0, len(texts), self.batch_size):
            chunk = [t if t.endswith(eos) else t + eos for t in texts[start:start + self.batch_size]]
            enc = self.tokenizer(chunk, padding=True, return_tensors="pt", truncation=self.limit is not None,
                                 max_length=self.limit).to(self.device)
            scores.append(rewards(self.model, enc["input_ids"], enc["attention_mask"]).cpu())
        return torch.cat(scores) if scores else torch.zeros(0)
