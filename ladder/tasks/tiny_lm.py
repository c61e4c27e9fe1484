"""Tiny language models built by the project, so every LM rung runs offline on a laptop CPU.

A tiny model is made the way a real one is, only smaller: train a byte-level BPE tokenizer on a
corpus, build a GPT-2- or Qwen2-architecture model from a config, pre-train it on the corpus
(next-token prediction), and ``save_pretrained`` both into a directory. The rungs then load it with
``AutoModelForCausalLM.from_pretrained(path)`` — the very call that loads a hub id.

The package ships the tiny models it uses, built once by this code (``tiny_models/<version>/``), so every
machine starts from the same weights: a model trained on the machine that runs it would differ from one
CPU to the next in its last bits, and every number downstream with it. Rebuild the shipped copies with

    python -m ladder.tasks.rebuild_tiny --rebuild

With ``LADDER_BUILD_TINY=1`` a tiny model is built into ``$LADDER_CACHE`` on first use instead.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ladder.runtime.errors import UsageError

SPECIAL = {"pad": "<|pad|>", "eos": "<|endoftext|>", "bos": "<|startoftext|>"}
SHIPPED = Path(__file__).resolve().parent / "tiny_models"  # the copies the package ships (see the module doc)


def cache_dir() -> Path:
    """``$LADDER_CACHE`` or ``~/.cache/ladder``."""
    return Path(os.environ.get("LADDER_CACHE", Path.home() / ".cache" / "ladder"))


def _usable_cache_dir() -> Path:
    """``cache_dir()``, created if need be; a path that is not a writable directory is a one-line error."""
    where = cache_dir()
    try:
        where.mkdir(parents=True, exist_ok=True)
        probe = Path(tempfile.mkdtemp(prefix=".probe-", dir=where))
        probe.rmdir()
    except OSError as e:
        raise UsageError(f"the model cache {where} ($LADDER_CACHE, default ~/.cache/ladder) is not a usable "
                         f"directory ({e.strerror or type(e).__name__}); point LADDER_CACHE at a writable "
                         f"directory") from None
    return where


def cached(name: str, build: Callable[[Path], None]) -> Path:
    """The shipped copy ``SHIPPED/name`` when there is one (and ``$LADDER_BUILD_TINY`` is not set); otherwise
    the directory ``cache_dir()/name``, built by ``build(tmp_dir)`` on first use (atomically)."""
    shipped = SHIPPED / name
    if (shipped / "config.json").exists() and not os.environ.get("LADDER_BUILD_TINY"):
        return shipped
    target = cache_dir() / name
    if (target / "config.json").exists():
        return target
    _usable_cache_dir()
    return build_into(target, build)


def build_into(target: Path, build: Callable[[Path], None]) -> Path:
    """``build(tmp)`` in a fresh directory beside ``target``, then renamed to it: never half-written."""
    name = target.name
    if target.exists():  # left incomplete by an interrupted or broken build
        shutil.rmtree(target, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        build(tmp)
        if not (tmp / "config.json").exists():
            raise RuntimeError(f"building {name} wrote no config.json into {tmp}")
        try:
            os.replace(tmp, target)
        except OSError:  # another process built it first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


@contextmanager
def isolated_build(seed: int) -> Iterator[None]:
    """Build deterministically on one thread (a model this small trains fastest on one, and a busy
    CPU hurts it less), leaving the caller's RNG and thread count as they were."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.set_num_threads(threads)


def save(model, tokenizer, path: Path) -> None:
    """``save_pretrained`` both, with generation stopping at the tokenizer's EOS."""
    from ladder.hub import quiet_progress

    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    with quiet_progress():
        model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def train_tokenizer(texts: list[str], vocab_size: int, chat_template: str | None = None,
                    individual_digits: bool = False, extra_special: tuple[str, ...] = (),
                    eos_token: str | None = None):
    """A byte-level BPE tokenizer (GPT-2 style) trained on ``texts``, as a transformers tokenizer.

    ``extra_special`` adds atomic tokens (e.g. chat markers); ``eos_token`` picks which special
    token ends a generation (an instruct model's end-of-turn marker).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                         if individual_digits else byte_level)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[*SPECIAL.values(), *extra_special],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    # Like Llama/Qwen-style tokenizers: encoding a text adds BOS in front (add_special_tokens=True).
    tok.post_processor = processors.TemplateProcessing(
        single=f"{SPECIAL['bos']} $A", special_tokens=[(SPECIAL["bos"], tok.token_to_id(SPECIAL["bos"]))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=SPECIAL["pad"],
                                   eos_token=eos_token or SPECIAL["eos"],
                                   bos_token=SPECIAL["bos"], padding_side="left")
    if chat_template is not None:
        fast.chat_template = chat_template
    return fast


def build_model(family: str, tokenizer, hidden: int = 128, layers: int = 4, heads: int = 4,
                max_positions: int = 256):
    """A randomly initialised causal LM of the given architecture, sized for a CPU."""
    from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

    ids = dict(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
               eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    if family == "gpt2":
        config = GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads, n_positions=max_positions, **ids)
        return GPT2LMHeadModel(config)
    if family == "qwen2":
        config = Qwen2Config(hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                             num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                             max_position_embeddings=max_positions, tie_word_embeddings=True, **ids)
        return Qwen2ForCausalLM(config)
    raise ValueError(f"family must be 'gpt2' or 'qwen2', got {family!r}")


class _FakeNF4(torch.nn.Module):
    """W ↦ W + (dequant(quant_nf4(W)) − W).detach(): the forward sees the 4-bit weight, the gradient
    reaches the full-precision one unchanged (straight-through estimator)."""

    def __init__(self, switch: dict):
        super().__init__()
        self.switch = switch

    def forward(self, weight):
        import bitsandbytes.functional as bnbf

        if not self.switch["on"]:
            return weight
        with torch.no_grad():
            packed, state = bnbf.quantize_4bit(weight.detach().contiguous(), blocksize=64, quant_type="nf4",
                                               compress_statistics=True)
            rounded = bnbf.dequantize_4bit(packed, state).to(weight.dtype)
        return weight + (rounded - weight).detach()


def quantization_aware(model, enable: bool) -> None:
    """Train every linear layer that QLoRA would quantise as if it were nf4 on a random half of the
    training forwards (QAT), so the model works both in full precision and once loaded in 4-bit —
    tiny models are far less robust to 4-bit weights than large ones."""
    from torch.nn.utils import parametrize

    head = model.get_output_embeddings()
    if enable:
        switch = {"on": False}

        def coin(module, args):
            switch["on"] = module.training and bool(torch.rand(()) < 0.5)

        model._ladder_qat_hook = model.register_forward_pre_hook(coin)
    elif hasattr(model, "_ladder_qat_hook"):
        model._ladder_qat_hook.remove()
        del model._ladder_qat_hook
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module is not head:
            if enable and not parametrize.is_parametrized(module, "weight"):
                parametrize.register_parametrization(module, "weight", _FakeNF4(switch))
            elif not enable and parametrize.is_parametrized(module, "weight"):
                parametrize.remove_parametrizations(module, "weight", leave_parametrized=False)


def pretrain(model, tokenizer, examples: list[tuple[str, str]], steps: int, batch_size: int = 32,
             lr: float = 3e-3, seed: int = 0, log_every: int = 0) -> list[float]:
    """Next-token training on (context, target) pairs; the loss counts the target tokens only.

    A plain corpus is ``("", text)``; supervised fine-tuning on a format is ``(prompt, answer)``.
    Every target ends with EOS so the model learns to stop. Returns the loss curve.
    """
    rng = random.Random(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 20) * (1 - s / steps))
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    encoded = {}  # an example's tokens, encoded when first drawn: a short build draws a small share of a corpus

    def tokens(i: int) -> tuple[list[int], list[int]]:
        if i not in encoded:
            context, target = examples[i]
            encoded[i] = tokenizer.encode(context), tokenizer.encode(target, add_special_tokens=False) + [eos]
        return encoded[i]

    model.train()
    losses = []
    for step in range(steps):
        rows = [tokens(rng.randrange(len(examples))) for _ in range(batch_size)]
        length = max(len(c) + len(t) for c, t in rows)
        ids = torch.full((batch_size, length), pad)
        labels = torch.full((batch_size, length), -100)
        attention = torch.zeros(batch_size, length, dtype=torch.long)
        for i, (c, t) in enumerate(rows):  # right padding for training
            seq = c + t
            ids[i, :len(seq)] = torch.tensor(seq)
            labels[i, len(c):len(seq)] = torch.tensor(t)
            attention[i, :len(seq)] = 1
        logits = model(input_ids=ids, attention_mask=attention).logits  # position i predicts token i + 1
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].float().flatten(0, 1), labels[:, 1:].flatten(),
                                                 ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if log_every and (step + 1) % log_every == 0:
            print(f"  pretrain step {step + 1}/{steps}: loss {sum(losses[-log_every:]) / log_every:.3f}")
    model.eval()
    return losses
