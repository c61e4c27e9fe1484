"""The tiny preference task: pairs of review continuations, ranked by a labeller whose taste is known, so that
what a reward model learns from them, and what a policy then makes of it, can be checked against the truth.

    prompts      the bundled review openings (``generated_reviews.BUNDLED_PROMPTS``)
    completions  two continuations of an opening, sampled from the tiny review GPT-2 (at most 16 tokens)
    true reward  r*(x, y) = s(x + y) − c·(k(y) + h(y))       what we want: a plainly positive review, no padding
                 s: VADER's compound sentiment in [−1, 1]; k(y): the completion's words that repeat an earlier word
                 of it; h(y): 1 if it hedges with a "but", else 0; c = PADDING per repeat or hedge
    labeller     ranks y_1 over y_2 with probability σ((u(y_1) − u(y_2)) / τ), u(y) = s(x + y) + b·n(y):
                 the sentiment, but swayed by length (b = LENGTH_BIAS per word; τ = TEMPERATURE the noise)

The labeller's length bias is the spurious feature: in the pairs the longer completion is chosen more often than the
truth warrants, a reward model fitted to them learns to pay for words and for a "but" (which opens a second clause),
and a policy optimised against that model far enough buys them the cheap way, with repeated words ("smart and smart
and smart") or a dangling "but the", which the truth marks down (Gao et al. 2022's over-optimisation; human
labellers' own pull towards length, Singhal et al. 2023). The pairs ship with the package (``tiny_data/``), each
with its two true rewards (``score_chosen``, ``score_rejected``, TRL's names for a pair's scores); ``build`` makes
them again.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from pathlib import Path

import torch

from ladder.runtime.errors import UsageError
from ladder.tasks import generated_reviews, review_models, sentiment_rewards

VERSION = "tiny-preferences-v1"
SHIPPED = Path(__file__).resolve().parent / "tiny_data" / f"{VERSION}.jsonl"
SPLITS = {"train": 2000, "test": 500}  # pairs per split, the test split sampled after the train one
PADDING = 0.3        # c: the truth's cost of each repeated word and of a hedging "but"
LENGTH_BIAS = 0.15   # b: the labeller's pull towards length, per word
TEMPERATURE = 0.25   # τ: the labeller's noise (σ of the utility difference over τ)
MAX_NEW_TOKENS = 16


def words(completion: str) -> int:
    return len(completion.split())


def repeats(completion: str) -> int:
    """k(y): the words of the completion that repeat an earlier word of it (case and punctuation ignored)."""
    ws = [w for w in (w.strip(".,!?;:").lower() for w in completion.split()) if w]
    return len(ws) - len(set(ws))


def hedges(completion: str) -> int:
    """h(y): 1 if the completion hedges with a "but", else 0."""
    return int(re.search(r"\bbut\b", completion.lower()) is not None)


class TrueReward:
    """r*(x, y) = s(x + y) − c·(k(y) + h(y)), for prompts and completions (a tensor, one per pair)."""

    name = "true reward (tiny preferences)"

    def __init__(self):
        self.sentiment = sentiment_rewards.VaderReward()

    def __call__(self, prompts: Sequence[str], completions: Sequence[str]) -> torch.Tensor:
        s = self.sentiment([p + c for p, c in zip(prompts, completions)])
        padding = torch.tensor([repeats(c) + hedges(c) for c in completions], dtype=torch.float32)
        return s - PADDING * padding


def anatomy(completions: Sequence[str]) -> dict[str, torch.Tensor]:
    """What r* charges for, one value per completion: ``words`` n(y), ``hedged`` h(y) (0 or 1) and ``padded``
    (1 if k(y) > 0: a word repeats an earlier one). Their means are what a run logs as words_mean, hedged_share and
    padded_share: where a policy's length went."""
    return {"words": torch.tensor([float(words(c)) for c in completions]),
            "hedged": torch.tensor([float(hedges(c)) for c in completions]),
            "padded": torch.tensor([float(repeats(c) > 0) for c in completions])}


ANATOMY_KEYS = {"words": "words_mean", "hedged": "hedged_share", "padded": "padded_share"}


def anatomy_means(completions: Sequence[str]) -> dict[str, float]:
    """{words_mean, hedged_share, padded_share} of ``completions``."""
    return {ANATOMY_KEYS[k]: v.mean().item() for k, v in anatomy(completions).items()}


TRUE_REWARDS = ("none", "tiny-preferences")  # --true-reward: the tasks that know their truth ("none": no truth)


def true_reward(name: str) -> TrueReward | None:
    """``--true-reward NAME``: the true reward r*(prompts, completions) a task knows, or None ("none")."""
    return TrueReward() if name == "tiny-preferences" else None


def check_plain_text(name: str, dataset: str, conversational: bool) -> None:
    """A true reward scores plain-text prompts and completions (review openings and their continuations): pairs of
    conversations have none to be scored by; one line."""
    if name != "none" and conversational:
        raise UsageError(f"--true-reward {name} scores plain-text completions (the tiny task's reviews), and the "
                         f"pairs of --dataset {dataset} are conversations; pass --true-reward none")


def labeller_utility(sentiment_score: float, completion: str) -> float:
    """u(y) = s(x + y) + b·n(y): what the labeller ranks by (before the noise)."""
    return sentiment_score + LENGTH_BIAS * words(completion)


def sample_completions(prompts: list[str], seed: int) -> list[str]:
    """One continuation of each prompt from the tiny review GPT-2 (temperature 1, at most 16 tokens)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = review_models.tiny_model_path()
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    torch.manual_seed(seed)
    completions = []
    for start in range(0, len(prompts), 256):
        enc = tokenizer(prompts[start:start + 256], return_tensors="pt", padding=True)
        out = model.generate(**enc, do_sample=True, top_k=0, max_new_tokens=MAX_NEW_TOKENS,
                             pad_token_id=tokenizer.pad_token_id)
        completions += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return completions


def label(prompt: str, first: str, second: str, truth: TrueReward, rng: random.Random) -> dict:
    """The labeller's pair: {"prompt", "chosen", "rejected", "score_chosen", "score_rejected"} (scores: r*)."""
    s1, s2 = truth.sentiment([prompt + first, prompt + second]).tolist()
    difference = (labeller_utility(s1, first) - labeller_utility(s2, second)) / TEMPERATURE
    first_wins = rng.random() < 1 / (1 + math.exp(-difference))
    chosen, rejected = (first, second) if first_wins else (second, first)
    r_chosen, r_rejected = truth([prompt, prompt], [chosen, rejected]).tolist()
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected,
            "score_chosen": round(r_chosen, 4), "score_rejected": round(r_rejected, 4)}


def build(path: Path = SHIPPED, seed: int = 0) -> Path:
    """Sample and label the pairs of every split into ``path`` (a .jsonl file, each row with its "split")."""
    rng, truth, rows = random.Random(seed), TrueReward(), []
    for k, (split, n) in enumerate(SPLITS.items()):
        prompts = [rng.choice(generated_reviews.BUNDLED_PROMPTS) for _ in range(n)]
        completions = sample_completions([p for p in prompts for _ in (0, 1)], seed + k)
        for i, prompt in enumerate(prompts):
            pair = label(prompt, completions[2 * i], completions[2 * i + 1], truth, rng)
            rows.append({"split": split, **pair})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def pairs(split: str) -> list[dict]:
    """The shipped pairs of one split ("train" or "test")."""
    rows = [json.loads(line) for line in SHIPPED.read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "split"} for row in rows if row["split"] == split]
