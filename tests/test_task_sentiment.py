"""The sentiment task: corpus, prompts, rewards and loading — offline, through the real code paths."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from ladder import hub
from ladder.policies import quant
from ladder.runtime.runlog import UsageError
from ladder.tasks import generated_reviews, review_models, review_prompts, sentiment_rewards, tiny_lm


def _load_lm(name: str):
    """(model, tokenizer) through the one causal-LM loader every rung uses."""
    path = hub.resolve(review_models.resolve_review_model(name), "--model")
    return quant.load_causal_lm(path, torch.device("cpu")), quant.load_tokenizer(path)


@pytest.fixture(scope="session")
def tiny_model_dir():
    """The tiny review model the package ships (``ladder/tasks/tiny_models``)."""
    return review_models.tiny_model_path()


def test_corpus_has_both_polarities_and_is_seeded():
    corpus = generated_reviews.review_corpus(400, seed=3)
    assert corpus == generated_reviews.review_corpus(400, seed=3) != generated_reviews.review_corpus(400, seed=4)
    scores = sentiment_rewards.VaderReward()(corpus)
    assert (scores > 0.05).float().mean() > 0.2 and (scores < -0.05).float().mean() > 0.2
    assert all(len(text.split()) <= 25 for text in corpus)


def test_every_bundled_prompt_opens_reviews_of_both_polarities():
    corpus = generated_reviews.review_corpus(6000, seed=0)
    vader = sentiment_rewards.VaderReward()
    for prompt in generated_reviews.BUNDLED_PROMPTS:
        scores = vader([t for t in corpus if t.startswith(prompt + " ")])
        assert scores.numel() and scores.max() > 0.3 and scores.min() < -0.3, prompt
    assert review_prompts.load_prompts("bundled", tokenizer=None) == generated_reviews.BUNDLED_PROMPTS


def test_vader_reward_orders_sentiment():
    scores = sentiment_rewards.VaderReward()(["This movie was great and I loved it.", "The plot", "It was awful."])
    assert scores.dtype == torch.float32 and scores.shape == (3,)
    assert scores[0] > 0.5 and scores[1] == 0.0 and scores[2] < -0.3
    assert scores.abs().max() <= 1.0


@pytest.mark.parametrize("id2label, index", [({0: "NEGATIVE", 1: "POSITIVE"}, 1), ({0: "positive", 1: "negative"}, 0),
                                             ({"0": "NEG", "1": "POS"}, 1)])
def test_positive_label_is_looked_up_in_id2label(id2label, index):
    assert sentiment_rewards.positive_label_index(id2label) == index


def test_classifier_without_positive_label_is_a_usage_error():
    with pytest.raises(UsageError, match="POSITIVE"):
        sentiment_rewards.positive_label_index({0: "LABEL_0", 1: "LABEL_1"})


@pytest.mark.parametrize("id2label", [{0: "NEGATIVE", 1: "POSITIVE"}, {0: "POSITIVE", 1: "NEGATIVE"}])
def test_classifier_reward_is_the_positive_logit_in_batches(tmp_path, id2label):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = review_models.save_random_distilbert_classifier(tmp_path / "clf", id2label)
    texts = ["This movie was great.", "The plot was dull and I hated it, a complete waste of time.", "Fun!"]
    reward = sentiment_rewards.ClassifierReward.load(str(path), batch_size=2)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    positive = next(i for i, label in id2label.items() if label == "POSITIVE")
    with torch.no_grad():
        expected = torch.stack([model(**{k: v for k, v in tokenizer(t, return_tensors="pt").items()
                                         if k != "token_type_ids"}).logits[0, positive] for t in texts])
    torch.testing.assert_close(reward(texts), expected, atol=1e-5, rtol=1e-5)
    assert sentiment_rewards.load_reward(str(path))(texts).shape == (3,)


def test_causal_lm_without_pad_token_pads_left_with_eos(tmp_path):
    path = review_models.save_random_gpt2(tmp_path / "gpt2")
    model, tokenizer = _load_lm(str(path))
    assert tokenizer.pad_token == tokenizer.eos_token and tokenizer.padding_side == "left"
    enc = tokenizer(["This movie", "The acting was really"], padding=True, return_tensors="pt")
    assert enc["attention_mask"][0, 0] == 0 and enc["attention_mask"][:, -1].all()
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id


def _write(path, rows):
    kind = path.suffix
    if kind == ".jsonl":
        path.write_text("".join(json.dumps({"text": r, "label": 1}) + "\n" for r in rows))
    elif kind == ".json":
        path.write_text(json.dumps([{"review": r} for r in rows]))
    elif kind == ".csv":
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["text", "label"])
            writer.writeheader()
            writer.writerows({"text": r, "label": 0} for r in rows)
    else:
        path.write_text("\n".join(rows) + "\n")
    return path


REVIEWS = ["This movie was a wonderful surprise from the very first scene to the last one.",
           "I rented this film on a rainy night<br /><br />and regretted every single minute of it.",
           "The acting is wooden, the plot is thin, and the jokes never land at all.",
           "!"]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".txt"])
def test_local_dataset_files_become_2_to_8_token_prompts(tmp_path, suffix, tiny_model_dir):
    _, tokenizer = _load_lm(str(tiny_model_dir))
    path = _write(tmp_path / f"reviews{suffix}", REVIEWS)
    assert review_prompts.read_texts(path) == REVIEWS
    prompts = review_prompts.load_prompts(str(path), tokenizer, 2, 8, seed=0)
    assert len(prompts) == 3  # "!" is shorter than two tokens
    for prompt, review in zip(prompts, REVIEWS):
        n = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        assert 2 <= n <= 8 and review.replace("<br />", " ").startswith(prompt) and "<br" not in prompt


def test_prompt_lengths_cover_the_range_and_follow_the_seed(tiny_model_dir):
    _, tokenizer = _load_lm(str(tiny_model_dir))
    texts = generated_reviews.review_corpus(200, seed=1)
    prompts = review_prompts.truncate_prompts(texts, tokenizer, 2, 8, seed=5)
    lengths = {len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts}
    assert min(lengths) == 2 and max(lengths) == 8
    assert prompts == review_prompts.truncate_prompts(texts, tokenizer, 2, 8, seed=5)


def test_prompt_limit_samples_across_a_label_sorted_file(tmp_path, tiny_model_dir):
    _, tokenizer = _load_lm(str(tiny_model_dir))
    rows = [f"Bad review number {i} here." for i in range(50)] + [f"Good review number {i} here." for i in range(50)]
    prompts = review_prompts.load_prompts(str(_write(tmp_path / "sorted.txt", rows)), tokenizer, 2, 2, limit=20, seed=0)
    assert len(prompts) == 20
    assert any(p.startswith("Bad") for p in prompts) and any(p.startswith("Go") for p in prompts)


@pytest.mark.parametrize("content, needle", [("{not json", "cannot parse"), ('[{"stars": 5}]', "text field")])
def test_bad_dataset_file_is_a_usage_error(tmp_path, content, needle):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=needle):
        review_prompts.load_review_texts(str(path))


def test_hub_ids_offline_fail_at_once_naming_the_tiny_preset(monkeypatch):
    from ladder import hub

    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: False)
    for call in (lambda: _load_lm("no-such-user/no-such-model"),
                 lambda: sentiment_rewards.load_reward("no-such-user/no-such-classifier"),
                 lambda: review_prompts.load_review_texts("no-such-user/no-such-dataset")):
        with pytest.raises(UsageError, match="--preset tiny") as info:
            call()
        assert "\n" not in str(info.value)


def test_broken_local_model_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UsageError, match="--model") as info:
        _load_lm(str(tmp_path))
    assert "\n" not in str(info.value)


def test_tiny_model_is_cached_and_writes_reviews(tiny_model_dir):
    assert review_models.tiny_model_path() == tiny_model_dir
    assert tiny_model_dir == tiny_lm.SHIPPED / review_models.TINY_MODEL_VERSION
    model, tokenizer = _load_lm("tiny")
    enc = tokenizer(["This movie", "The acting was"], padding=True, return_tensors="pt")
    torch.manual_seed(0)
    out = model.generate(**enc, do_sample=False, max_new_tokens=12, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    texts = tokenizer.batch_decode(out, skip_special_tokens=True)
    assert texts[0].startswith("This movie ") and texts[1].startswith("The acting was ")
    assert all(len(t.split()) >= 3 for t in texts)
