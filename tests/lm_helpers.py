"""What the GRPO tests share: GSM8K-style rows, a tiny Qwen2 saved like a hub snapshot, a small run's
config and its metrics."""

from __future__ import annotations

import json

import pytest
import torch

from ladder.rungs import grpo
from ladder.tasks import arithmetic, tiny_lm

GSM8K_ROWS = [
    {"question": "Tom has 2 apples and buys 3 more. How many apples does he have?", "answer": "2+3=5\n#### 5"},
    {"question": "A book costs $12 and a pen $3. What do both cost?", "answer": "12+3=15\n#### 15"},
    {"question": "There are 10 birds; 4 fly away. How many are left?", "answer": "10-4=6\n#### 6"},
    {"question": "Sam reads 7 pages a day for 2 days. How many pages?", "answer": "7*2=14\n#### 14"},
    {"question": "Ann had 1,000 stamps and gave away 1. How many remain?", "answer": "#### 999"},
    {"question": "What is 6 + 6?", "answer": "#### 12"},
]


def save_tiny_qwen(path) -> str:
    """A Qwen2-architecture model with a chat template and random weights (seed 0), saved to ``path``."""
    corpus = [r["question"] + " " + r["answer"] for r in GSM8K_ROWS] * 5
    tokenizer = arithmetic.chat_tokenizer(corpus, vocab_size=300)
    torch.manual_seed(0)
    model = tiny_lm.build_model("qwen2", tokenizer, hidden=64, layers=2, heads=2, max_positions=256)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(autouse=True, scope="module")
def one_thread_then_back():
    """The runs use --threads 1 (bit-for-bit repeatable on the CPU; torch's reductions over several
    threads differ in the last bits from run to run), which train() sets for the whole process."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def grpo_config(tmp_path, model, dataset, **kw):
    """A two-step GRPO run of 2 prompts × 4 completions of 8 tokens on one thread, writing to tmp_path/run."""
    base = dict(model=model, dataset=dataset, steps=2, prompts_per_step=2, group_size=4, max_new_tokens=8,
                eval_size=2, eval_every=0, lr=1e-3, lora=True, out=str(tmp_path / "run"), progress=False,
                print_samples=0, threads=1)
    return grpo.Config(**{**base, **kw})


def read_metrics(out) -> list[dict]:
    """The records of ``out``/metrics.jsonl."""
    return [json.loads(line) for line in open(f"{out}/metrics.jsonl")]
