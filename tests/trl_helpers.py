"""What the TRL parity tests share: TRL itself (the importing test module is skipped without trl 1.16),
the tolerance, the tiny model, and one thread with TRL's generators kept out of the caller's way.

Tolerance: float32 everywhere; TRL's fused, chunked log-prob kernel (positions 0.. over the left
padding) and ladder's chunked one (positions skipping it, the prompt's KV cache shared over its
group) round differently. ``close`` allows atol 1e-6 + rtol 1e-5 × the tensor's largest |entry|;
measured: losses (≈ 0.01–0.3) agree within 2e-7, gradients (entries up to ≈ 3) within 5e-6.
"""

from __future__ import annotations

import random
from contextlib import contextmanager

import numpy as np
import pytest
import torch

trl = pytest.importorskip("trl", minversion="1.16")

from datasets import Dataset  # noqa: E402, F401 (for the test modules)
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402, F401 (for the test modules)
from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer  # noqa: E402, F401 (for the test modules)

from ladder.tasks import arithmetic, tiny_lm  # noqa: E402

TEMPERATURE = 0.7
MAX_COMPLETION_LENGTH = 8  # > the completions' width below, so dr_grpo's constant is not the width
EPSILON = 0.2
ATOL, RTOL = 1e-6, 1e-5


def close(actual, expected, what="", rtol=RTOL):
    """|actual − expected| ≤ atol + rtol · max|expected|, over the whole tensor (float32 rounding in a sum
    scales with its largest terms, not with an element that happens to cancel to near zero)."""
    actual, expected = torch.as_tensor(actual).double(), torch.as_tensor(expected).double()
    assert actual.shape == expected.shape, f"{what}: shapes {actual.shape} vs {expected.shape}"
    error = (actual - expected).abs().max().item()
    bound = ATOL + rtol * expected.abs().max().item()
    assert error <= bound, f"{what}: max |difference| {error:.3g} > {bound:.3g} = atol + rtol · max |expected|"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """A model this small runs fastest on one thread, and a busy CI machine hurts it least. On the way
    out, drop the accelerate state the trainers created, so later tests in this process start clean."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


@contextmanager
def kept_rng():
    """``Trainer.__init__`` seeds random, numpy and torch (args.seed); leave the caller's generators as they were."""
    py, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        yield
    random.setstate(py)
    np.random.set_state(np_state)


def save_parity_model(path) -> str:
    """A tiny Qwen2 with a chat tokenizer, saved like a hub snapshot. Its weights are drawn wide enough
    (std 0.3) that the next-token distributions are far from uniform and the gradients are not tiny."""
    corpus = ["What is 2 + 3? 5", "Tom has 4 apples and buys 3 more. 7", "How many are left? 6"] * 5
    tokenizer = arithmetic.chat_tokenizer(corpus, vocab_size=300)
    with tiny_lm.isolated_build(seed=0):
        model = tiny_lm.build_model("qwen2", tokenizer, hidden=32, layers=2, heads=2, max_positions=64)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() > 1:
                    p.normal_(0.0, 0.3)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def tokenizer_of(model_dir):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    return tokenizer


def grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
