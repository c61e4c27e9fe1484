"""The before/after samples of an RLHF-PPO run: completions of fixed prompts under a fixed sampling seed
(``sample_table``) and the Markdown table of both (``before_after_table``, samples.md)."""

from __future__ import annotations

import torch

from ladder.rungs.ppo_sentiment.experience import rollout, score
from ladder.rungs.ppo_sentiment.options import Config


def sample_table(policy, tokenizer, reward_fn, prompts: list[str], cfg: Config) -> list[dict]:
    """Completions of fixed prompts under a fixed sampling seed (the global RNG is left untouched)."""
    if not prompts:
        return []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed + 12_345)
        _, completions, texts = rollout(policy, tokenizer, prompts, cfg)
    scores = score(reward_fn, texts, cfg.forward_batch_size)
    return [{"prompt": p, "completion": c, "score": round(s.item(), 4)} for p, c, s in zip(prompts, completions,
                                                                                        scores)]


def _cell(text: str, width: int) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= width else text[:width - 1] + "…"


def before_after_table(before: list[dict], after: list[dict], width: int = 44) -> str:
    """A Markdown table: prompt | completion before | score | completion after | score."""
    lines = ["| prompt | before training | score | after training | score |", "|---|---|---:|---|---:|"]
    for b, a in zip(before, after):
        lines.append(f"| {_cell(b['prompt'], 28)} | {_cell(b['completion'], width)} | {b['score']:+.2f} "
                     f"| {_cell(a['completion'], width)} | {a['score']:+.2f} |")
    if before:
        mean_b = sum(b["score"] for b in before) / len(before)
        mean_a = sum(a["score"] for a in after) / len(after)
        lines.append(f"| **mean** | | {mean_b:+.2f} | | {mean_a:+.2f} |")
    return "\n".join(lines)
