"""The review models of the sentiment task: the default hub model, the tiny GPT-2 review writer built here from the
generated corpus (offline, shipped in tiny_models/), untrained stand-ins for hub models (tests, offline), and which
model a ``--model`` name means (``resolve_review_model``)."""

from __future__ import annotations

from pathlib import Path

import torch

from ladder.hub import quiet_progress
from ladder.tasks.generated_reviews import review_corpus

DEFAULT_MODEL = "lvwerra/gpt2-imdb"
TINY_MODEL_VERSION = "tiny-gpt2-sentiment-v4"


def build_tiny_sentiment_model(path: Path, steps: int = 400, seed: int = 0, batch_size: int = 32) -> None:
    """A GPT-2-architecture review writer: byte-level BPE + 2 layers × 96 hidden, pre-trained on
    generated reviews of both polarities (about half a minute on a 2-core CPU), saved with
    ``save_pretrained`` so the rung loads it like any hub model. ``batch_size``: reviews per step."""
    from ladder.tasks import tiny_lm

    corpus = review_corpus(6000, seed=seed)
    tokenizer = tiny_lm.train_tokenizer(corpus, vocab_size=600)
    with tiny_lm.isolated_build(seed):
        model = tiny_lm.build_model("gpt2", tokenizer, hidden=96, layers=2, heads=4, max_positions=64)
        tiny_lm.pretrain(model, tokenizer, [("", text) for text in corpus], steps=steps,
                         batch_size=batch_size, lr=3e-3, seed=seed)
    tiny_lm.save(model, tokenizer, path)


def tiny_model_path() -> Path:
    """The tiny review model: the copy the package ships (``tiny_lm.cached``; built into ``$LADDER_CACHE`` on first
    use with ``LADDER_BUILD_TINY=1``)."""
    from ladder.tasks import tiny_lm

    return tiny_lm.cached(TINY_MODEL_VERSION, build_tiny_sentiment_model)


def save_random_gpt2(path: Path, with_pad_token: bool = False, seed: int = 0) -> Path:
    """An untrained GPT-2 from a config, saved like a hub model; like GPT-2's own tokenizer, its
    tokenizer has no pad token unless asked. Stands in for ``--model gpt2``-style ids offline."""
    from ladder.tasks import tiny_lm

    tokenizer = tiny_lm.train_tokenizer(review_corpus(500, seed=seed), vocab_size=300)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = tiny_lm.build_model("gpt2", tokenizer, hidden=32, layers=1, heads=2, max_positions=64)
    if not with_pad_token:
        model.config.pad_token_id = None
        model.generation_config.pad_token_id = None
        tokenizer.pad_token = None
    with quiet_progress():
        model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return Path(path)


def save_random_distilbert_classifier(path: Path, id2label: dict | None = None, seed: int = 0) -> Path:
    """An untrained DistilBERT sequence classifier (id2label {0: NEGATIVE, 1: POSITIVE} by default) with
    a WordPiece tokenizer, saved like a hub model: stands in for ``lvwerra/distilbert-imdb`` offline."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import DistilBertConfig, DistilBertForSequenceClassification, PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(review_corpus(500, seed=seed),
                            trainers.WordPieceTrainer(vocab_size=300, special_tokens=special, show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                        sep_token="[SEP]", mask_token="[MASK]", model_max_length=128)
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    id2label = id2label or {0: "NEGATIVE", 1: "POSITIVE"}
    config = DistilBertConfig(vocab_size=len(tokenizer), dim=32, hidden_dim=64, n_layers=1, n_heads=2,
                              max_position_embeddings=128, id2label=id2label,
                              label2id={v: k for k, v in id2label.items()}, pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DistilBertForSequenceClassification(config)
    with quiet_progress():
        model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return Path(path)


def resolve_review_model(name: str) -> str:
    """``"tiny"``: the project's tiny review model (shipped with the package); any other name as given.
    The model itself loads through ``ladder.policies.quant``, as every causal LM of the ladder does."""
    return str(tiny_model_path()) if name == "tiny" else name
