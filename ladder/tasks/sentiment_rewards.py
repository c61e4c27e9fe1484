"""The sentiment task's rewards: a reward function maps texts (prompt + completion) to a float tensor of scores, one
per text — the POSITIVE logit of a sequence classifier (default ``lvwerra/distilbert-imdb``), a reward model r_φ's
score, or VADER's compound score in [−1, 1] (offline, the lexicon ships with vaderSentiment)."""

from __future__ import annotations

import inspect
import json
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from ladder.runtime.errors import UsageError
from ladder.tasks.hub_loading import hub_or_local

DEFAULT_REWARD_MODEL = "lvwerra/distilbert-imdb"


class VaderReward:
    """VADER's compound score (Hutto & Gilbert 2014): a rule-based sentiment in [−1, 1]."""

    name = "vader"

    def __init__(self):
        try:
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
        except ImportError:
            raise UsageError("--reward-model vader needs vaderSentiment: pip install vaderSentiment") from None
        self.analyzer = SentimentIntensityAnalyzer()

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        return torch.tensor([self.analyzer.polarity_scores(t)["compound"] for t in texts], dtype=torch.float32)


def positive_label_index(id2label: dict) -> int:
    """The class index whose label is POSITIVE (case-insensitive; POS accepted)."""
    for index, label in id2label.items():
        if str(label).strip().upper() in ("POSITIVE", "POS"):
            return int(index)
    raise UsageError(f"the reward model has no POSITIVE label (id2label = {dict(id2label)}); "
                     f"pass a sentiment classifier with --reward-model")


def refuse_an_unfinished_runs_model(name: str, flag: str) -> None:
    """A model saved inside a run directory (``OUT/reward_model``) belongs to that run: it is read only once the run
    has finished (its summary.json written), never beside an unfinished run that an ``--overwrite`` started."""
    run_dir = Path(name).parent
    if Path(name).is_dir() and (run_dir / "config.json").is_file() and not (run_dir / "summary.json").is_file():
        try:
            rung = json.loads((run_dir / "config.json").read_text()).get("rung", "reward-model")
        except (OSError, ValueError, AttributeError):
            rung = "reward-model"
        raise UsageError(f"{flag} {name}: the run in {run_dir} has not finished (no summary.json), so this is not "
                         f"its model; finish it with python -m ladder.run {rung} --resume {shlex.quote(str(run_dir))}, "
                         f"or give a finished run's model")


class ClassifierReward:
    """The POSITIVE logit of a Hugging Face sequence classifier, scored in batches without gradients."""

    def __init__(self, model, tokenizer, batch_size: int = 16, max_length: int = 512, device: str = "cpu"):
        self.model = model.to(device).eval().requires_grad_(False)
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.positive = positive_label_index(model.config.id2label)
        self.name = f"logit[{model.config.id2label[self.positive]}]"
        self.accepts = set(inspect.signature(model.forward).parameters)

    @classmethod
    def load(cls, name: str, device: str = "cpu", batch_size: int = 16):
        """The classifier's POSITIVE logit; a model with one label (a reward model r_φ) is scored as it is
        (``policies.scalar_head.LearnedReward``)."""
        from transformers import AutoTokenizer

        from ladder.policies.scalar_head import load_classifier

        flag = "--reward-model"
        refuse_an_unfinished_runs_model(name, flag)
        tokenizer = hub_or_local(name, "reward model's tokenizer", flag, AutoTokenizer.from_pretrained)
        model = hub_or_local(name, "reward model", flag, lambda path: load_classifier(path, name, flag))
        if model.config.num_labels == 1:  # a scalar head: ladder's reward-model rung (or TRL's RewardTrainer)
            from ladder.policies.scalar_head import LearnedReward

            return LearnedReward(model, tokenizer, batch_size, device)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        limit = getattr(model.config, "max_position_embeddings", 512) or 512
        return cls(model, tokenizer, batch_size, min(limit, tokenizer.model_max_length or limit), device)

    @torch.no_grad()
    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        scores = []
        for start in range(0, len(texts), self.batch_size):
            enc = self.tokenizer(list(texts[start:start + self.batch_size]), padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt").to(self.device)
            inputs = {k: v for k, v in enc.items() if k in self.accepts}  # DistilBERT takes no token_type_ids
            scores.append(self.model(**inputs).logits[:, self.positive].float().cpu())
        return torch.cat(scores) if scores else torch.zeros(0)


def load_reward(name: str, device: str = "cpu", batch_size: int = 16) -> Callable[[Sequence[str]], torch.Tensor]:
    """``"vader"`` → VADER; anything else → a sequence classifier id or directory."""
    if name == "vader":
        return VaderReward()
    return ClassifierReward.load(name, device, batch_size)
