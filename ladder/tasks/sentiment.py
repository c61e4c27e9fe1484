"""Movie-review sentiment: prompts, reward models and the tiny offline review model.

The classic RLHF exercise: continue the opening of a movie review so that it reads positive.

    prompts   2–8-token prefixes of IMDB reviews (``stanfordnlp/imdb`` through ``datasets``, or a local
              .jsonl/.json/.csv/.txt file), or the bundled review openings (offline)
    rewards   the POSITIVE logit of a sequence classifier (default ``lvwerra/distilbert-imdb``), or
              VADER's compound score in [−1, 1] (offline, the lexicon ships with vaderSentiment)
    model     any causal LM id or path (default ``lvwerra/gpt2-imdb``), or the tiny GPT-2 built here
              from a generated corpus of short reviews of both polarities (offline, shipped in tiny_models/)

A reward function maps texts (prompt + completion) to a float tensor of scores, one per text.
Everything that would touch the Hugging Face hub goes through ``hub_or_local`` (``ladder.hub``) so
that, offline, a hub id that is not cached fails at once with one line that names ``--preset tiny``.
"""

from __future__ import annotations

import csv
import inspect
import json
import random
import shlex
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path

import torch

from ladder.hub import quiet_progress  # noqa: F401 - also used as sentiment.quiet_progress
from ladder.runtime.errors import UsageError

DEFAULT_MODEL = "lvwerra/gpt2-imdb"
DEFAULT_REWARD_MODEL = "lvwerra/distilbert-imdb"
DEFAULT_DATASET = "stanfordnlp/imdb"
TINY_MODEL_VERSION = "tiny-gpt2-sentiment-v4"
# The generated critic is a little grumpy: 30% of its one-polarity reviews are positive, so the
# tiny model starts slightly negative on average and the climb to positive is plain to see.
POSITIVE_SHARE = 0.3
OFFLINE_HINT = "use --preset tiny to train offline (python -m ladder.run ppo-sentiment --preset tiny)"

# --- the generated review corpus ---------------------------------------------------------------

# Subjects the corpus and the bundled prompts share: (opening, verb forms for the subject).
_SUBJECTS = [
    ("This movie", "sg"), ("This film", "sg"), ("The acting", "sg"), ("The plot", "sg"), ("The story", "sg"),
    ("The ending", "sg"), ("The cast", "sg"), ("The music", "sg"), ("The script", "sg"), ("The director", "sg"),
    ("The characters", "pl"), ("The dialogue", "sg"), ("The soundtrack", "sg"), ("The effects", "pl"),
    ("The first half", "sg"), ("Overall, the film", "sg"), ("Honestly, this movie", "sg"), ("The lead actor", "sg"),
    ("The jokes", "pl"), ("The camera work", "sg"), ("This sequel", "sg"), ("The villain", "sg"),
]
_VERBS = {"sg": ["was", "is", "felt", "seemed", "was really", "is truly", "turned out to be", "was just"],
          "pl": ["were", "are", "felt", "seemed", "were really", "are truly", "turned out to be", "were just"]}
_ADJECTIVES = {
    +1: ["great", "wonderful", "excellent", "brilliant", "amazing", "beautiful", "fantastic", "delightful",
         "superb", "charming", "funny", "moving", "perfect", "fun", "enjoyable", "good", "lovely", "touching",
         "impressive", "hilarious", "smart", "sweet", "fresh", "gorgeous"],
    -1: ["terrible", "awful", "boring", "horrible", "dull", "bad", "stupid", "painful", "weak", "disappointing",
         "ugly", "annoying", "poor", "pathetic", "lame", "sad", "ridiculous", "dreadful", "silly", "messy",
         "tedious", "bland", "cheap", "flat"],
}
_TAILS = {
    +1: ["", "", "", " and I loved it", " and I would watch it again", " from start to finish",
         " and the whole family enjoyed it", ", a real treat", ", highly recommended", " and made me smile",
         ", one of the best this year", " and I laughed a lot"],
    -1: ["", "", "", " and I hated it", " and I wanted my money back", " from start to finish",
         ", a complete waste of time", " and I almost fell asleep", ", avoid it", " and made me angry",
         ", one of the worst this year", " and nobody laughed"],
}
# Openings that go on with a verb phrase ("... and I loved it") or with "was <adjective>".
_AND_OPENINGS = [("I watched this movie and", "I"), ("I saw this film and", "I"), ("We rented this and", "we")]
_IT_OPENINGS = ["My wife and I thought it", "I have to say it", "In the end it"]
_I_VERBS = {+1: ["loved it", "really enjoyed it", "liked it a lot", "was glad", "would recommend it"],
            -1: ["hated it", "really disliked it", "was bored", "regretted it", "would not recommend it"]}

# Review openings used as prompts offline: every one starts sentences of both polarities.
BUNDLED_PROMPTS = [s for s, _ in _SUBJECTS] + [f"{s} {v}" for s, n in _SUBJECTS[:8] for v in _VERBS[n][:2]] + [
    *(o for o, _ in _AND_OPENINGS), *_IT_OPENINGS,
]


def review_sentence(rng: random.Random, polarity: int | None = None) -> str:
    """One short review of the given polarity (+1 / −1; None: either, or a mixed "A but B" review)."""
    if polarity is None:
        if rng.random() < 0.15:  # mixed: a good and a bad half
            first, second = rng.sample([+1, -1], 2)
            subj_a, subj_b = rng.sample(_SUBJECTS, 2)
            verb_a, verb_b = rng.choice(_VERBS[subj_a[1]]), rng.choice(_VERBS[subj_b[1]])
            lower_b = subj_b[0][0].lower() + subj_b[0][1:]
            return (f"{subj_a[0]} {verb_a} {rng.choice(_ADJECTIVES[first])} but {lower_b} {verb_b} "
                    f"{rng.choice(_ADJECTIVES[second])}.")
        polarity = +1 if rng.random() < POSITIVE_SHARE else -1
    if rng.random() < 0.1:
        opening, pronoun = rng.choice(_AND_OPENINGS)
        verb = rng.choice(_I_VERBS[polarity]).replace("was", "were") if pronoun == "we" else rng.choice(
            _I_VERBS[polarity])
        return f"{opening} {pronoun} {verb}."
    if rng.random() < 0.1:
        return f"{rng.choice(_IT_OPENINGS)} was {rng.choice(_ADJECTIVES[polarity])}{rng.choice(_TAILS[polarity])}."
    subject, number = rng.choice(_SUBJECTS)
    adjectives = rng.sample(_ADJECTIVES[polarity], 2)
    body = adjectives[0] if rng.random() < 0.6 else f"{adjectives[0]} and {adjectives[1]}"
    if rng.random() < 0.2:
        body = f"{rng.choice(['very', 'so', 'quite', 'really', 'truly'])} {body}"
    return f"{subject} {rng.choice(_VERBS[number])} {body}{rng.choice(_TAILS[polarity])}."


def review_corpus(n: int, seed: int = 0) -> list[str]:
    """``n`` generated short movie reviews of both polarities (see ``POSITIVE_SHARE``), some mixed."""
    rng = random.Random(seed)
    return [review_sentence(rng) for _ in range(n)]


# --- the tiny offline model --------------------------------------------------------------------

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


# --- loading from the hub or from disk ---------------------------------------------------------

def hub_or_local(name: str, what: str, flag: str, load: Callable[[str], object], kind: str = "model"):
    """``load(path)`` where ``ladder.hub.resolve`` finds ``name`` (a local path, a hub id while the hub
    answers, or its cached snapshot offline); any failure becomes one ``UsageError`` line."""
    from ladder import hub

    path = hub.resolve(name, flag, kind)
    try:
        with quiet_progress() if Path(path).exists() else nullcontext():
            return load(path)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - a broken path, an unknown id, a network error: one line
        detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise UsageError(f"{flag} {name}: cannot load the {what} ({type(e).__name__}: {detail}); "
                         f"offline? {OFFLINE_HINT}") from None


def resolve_model(name: str) -> str:
    """``"tiny"``: the project's tiny review model (shipped with the package); any other name as given.
    The model itself loads through ``ladder.policies.quant``, as every causal LM of the ladder does."""
    return str(tiny_model_path()) if name == "tiny" else name


# --- rewards -----------------------------------------------------------------------------------

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
        (``policies.reward_model.LearnedReward``)."""
        from transformers import AutoTokenizer

        from ladder.policies.reward_model import load_classifier

        flag = "--reward-model"
        refuse_an_unfinished_runs_model(name, flag)
        tokenizer = hub_or_local(name, "reward model's tokenizer", flag, AutoTokenizer.from_pretrained)
        model = hub_or_local(name, "reward model", flag, lambda path: load_classifier(path, name, flag))
        if model.config.num_labels == 1:  # a scalar head: ladder's reward-model rung (or TRL's RewardTrainer)
            from ladder.policies.reward_model import LearnedReward

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


# --- prompts -----------------------------------------------------------------------------------

_TEXT_FIELDS = ("review", "text", "prompt", "sentence", "content")


def _pick_text(row, where: str) -> str:
    if isinstance(row, str):
        return row
    if isinstance(row, dict):
        for key in _TEXT_FIELDS:
            if isinstance(row.get(key), str):
                return row[key]
    raise UsageError(f"--dataset {where}: every row needs a text field (one of {', '.join(_TEXT_FIELDS)})")


def read_texts(path: Path) -> list[str]:
    """Review texts from a local .jsonl / .json / .csv / .txt (one review per line) file."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        elif suffix == ".json":
            data = json.loads(path.read_text())
            rows = data if isinstance(data, list) else data.get("train", data.get("rows", data.get("text", [])))
        elif suffix == ".csv":
            with path.open(newline="") as f:
                rows = list(csv.DictReader(f))
        elif suffix == ".txt":
            rows = [line for line in path.read_text().splitlines() if line.strip()]
        else:
            raise UsageError(f"--dataset {path}: use a .jsonl, .json, .csv or .txt file")
    except (ValueError, UnicodeDecodeError, csv.Error) as e:
        raise UsageError(f"--dataset {path}: cannot parse the file ({type(e).__name__})") from None
    if not isinstance(rows, list):
        raise UsageError(f"--dataset {path}: expected a list of rows")
    return [_pick_text(row, str(path)) for row in rows]


def load_review_texts(dataset: str, split: str = "train") -> list[str]:
    """Review texts from a local file or, through ``datasets.load_dataset``, from the hub."""
    path = Path(dataset)
    if path.is_file():
        texts = read_texts(path)
    elif path.is_dir():
        raise UsageError(f"--dataset {path}: pass a .jsonl, .json, .csv or .txt file, not a directory")
    else:
        def load(where):
            import datasets

            return datasets.load_dataset(where, split=split)

        rows = hub_or_local(dataset, "dataset", "--dataset", load, kind="dataset")
        column = next((c for c in _TEXT_FIELDS if c in rows.column_names), None)
        if column is None:
            raise UsageError(f"--dataset {dataset}: no text column among {rows.column_names}")
        texts = list(rows[column])
    texts = [t for t in (str(t).replace("<br />", " ").strip() for t in texts) if t]
    if not texts:
        raise UsageError(f"--dataset {dataset}: no texts")
    return texts


def truncate_prompts(texts: Sequence[str], tokenizer, min_tokens: int = 2, max_tokens: int = 8, seed: int = 0,
                     max_chars: int = 256) -> list[str]:
    """Each text cut to its first k tokens, k ~ U{min_tokens..max_tokens} (TRL's LengthSampler),
    decoded back to text. Texts shorter than ``min_tokens`` are dropped."""
    rng = random.Random(seed)
    encoded = tokenizer([t[:max_chars] for t in texts], add_special_tokens=False)["input_ids"]
    prompts = []
    for ids in encoded:
        k = rng.randint(min_tokens, max_tokens)
        if len(ids) >= min_tokens:
            prompts.append(tokenizer.decode(ids[:k]).strip())
    return [p for p in prompts if p]


def load_prompts(dataset: str, tokenizer, min_tokens: int = 2, max_tokens: int = 8, limit: int | None = None,
                 seed: int = 0) -> list[str]:
    """Prompt texts: ``"bundled"`` → the bundled review openings; otherwise 2–8-token prefixes of the
    reviews in ``dataset`` (a hub id or a local file), at most ``limit`` of them, drawn at random
    (IMDB's train split is sorted by label: its first reviews are all negative)."""
    if dataset == "bundled":
        return list(BUNDLED_PROMPTS)
    texts = load_review_texts(dataset)
    if limit and limit < len(texts):
        texts = random.Random(seed).sample(texts, limit)
    prompts = truncate_prompts(texts, tokenizer, min_tokens, max_tokens, seed)
    if not prompts:
        raise UsageError(f"--dataset {dataset}: no review has {min_tokens} tokens")
    return prompts
