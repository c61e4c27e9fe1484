"""The failure gallery: the failures the doctor names, each reproduced by a seeded tiny run on the CPU, and the flags
that fix it. Most entries are a flag or two away from a healthy preset; too_hard and format_hacking need a data file
of products, the gsm8k task and a prompt. Not every signature has an entry: no run here shows length_drift, and
no_signal only in its too-hard case, not its too-easy one (notebook 8 checks this against ``signatures.SIGNATURES``).

    broken run = python -m ladder.run RUNG  *preset  *breaks
    fixed run  = python -m ladder.run RUNG  *preset  *breaks  *fix      (a later flag wins)

This module holds the entries and their flags, not the runs: ``ladder.run_cache.run_gallery_entry(name)`` runs one of
them (about 5 s on one core) and returns its run directory, kept under ``default_cache()`` (``$LADDER_CACHE/gallery``,
so the notebook and the tests share the runs): keyed by the run's full configuration, ladder's source, the libraries'
versions and the CPU-kernel variables, whole or absent, made by one process at a time.
"""

from __future__ import annotations

import json
import os
import random
import threading
from dataclasses import dataclass
from pathlib import Path

SHORT = ("--no-progress", "--threads", "1")
# The healthy presets, shortened where the full preset takes minutes: 8 updates give thirds of 2, 4 and 2
# logged points, enough for every trend signature (Thresholds.min_points_trend = 6).
PRESETS = {
    "grpo": ("--preset", "tiny", "--steps", "8", "--eval-size", "20", "--eval-every", "0", "--print-samples", "0",
             *SHORT),
    "ppo-sentiment": ("--preset", "tiny", "--steps", "8", *SHORT),
    "cartpole": ("--preset", "tiny", *SHORT),
    "reinforce": ("--preset", "tiny", *SHORT),
    "agent": ("--preset", "tiny", "--steps", "8", "--eval-size", "10", "--eval-every", "0", "--print-samples", "0",
              *SHORT),
}
DATA = "{data}"  # in a flag: the directory of the gallery's data files (written next to the cached runs)
TINY_PROMPT = "Solve it. End with #### and the number."


@dataclass(frozen=True)
class Failure:
    signature: str  # the doctor's signature the broken run must trigger (and no other problem)
    rung: str
    breaks: tuple[str, ...]  # flags added to the healthy preset
    fix: tuple[str, ...]  # flags added after them
    why: str
    setting: tuple[str, ...] = ()  # flags that change the preset in both runs (shorter, or so a trend shows)

    @property
    def preset(self) -> tuple[str, ...]:
        return (*PRESETS[self.rung], *self.setting)


GALLERY = {
    "loss_and_clip_zero": Failure(
        "clip_zero", "grpo", (), ("--mu", "2"),
        "at μ·M = 1 the ratio π_θ/π_old is 1 to float32 rounding: nothing is clipped and the loss is the mean "
        "advantage, ≈ 0 — harmless; a second pass (μ = 2) moves the ratio"),
    "truncation": Failure(
        "truncation", "grpo", ("--max-new-tokens", "12"), ("--max-new-tokens", "28"),
        "the worked sum needs more than 12 tokens (notebook 8 §3 prints the completions' lengths): a completion cut "
        "off has no answer line and scores 0, and a group whose completions are all cut off is alike, Â = 0"),
    "too_hard": Failure(
        "no_signal", "grpo", ("--task", "gsm8k", "--dataset", f"{DATA}/products.jsonl", "--system-prompt",
                              TINY_PROMPT, "--reward-funcs", "correctness"), ("--task", "arithmetic"),
        "a model taught two-digit sums hardly ever gets a three-digit product right: with correctness the only "
        "reward, nearly every completion scores 0 and nearly every group is alike"),
    "format_hacking": Failure(
        "format_hacking", "grpo", ("--task", "gsm8k", "--dataset", f"{DATA}/products.jsonl", "--system-prompt",
                                   TINY_PROMPT, "--temperature", "1.3", "--kl-coef", "0.2", "--steps", "12"),
        ("--task", "arithmetic"),
        "on products the tiny model never solves, only the format reward tells completions apart: sampled at "
        "τ = 1.3 it loses the format at first, then learns the format, so the format reward rises while correctness "
        "stays near 0; the fix gives it data it can learn (the sums), where the doctor sees no format-only rise"),
    "kl_blowup": Failure(
        "kl_blowup", "grpo", ("--lr", "1e-2", "--warmup-steps", "0"), ("--lr", "1e-3"),
        "ten times the preset's learning rate, from the first update: each step moves the policy farther than "
        "β·KL holds it, and the KL to π_ref climbs past the doctor's threshold"),
    "nothing_moving": Failure(
        "nothing_moving", "grpo", ("--lr", "1e-6",), ("--lr", "1e-3",),
        "a full-fine-tuning rate on LoRA adapters (which start at zero): the policy stays at π_ref, the reward "
        "flat"),
    "sampler_mismatch": Failure(
        "sampler_mismatch", "grpo", ("--sampler-dtype", "bfloat16", "--sampler-correction", "token_truncate",
                                     "--sampler-clip-max", "1.0001"), ("--sampler-dtype", "same"),
        "bfloat16 rounding moves the sampler's log-probs off the float32 π_old's by more than the cap's 1e-4 "
        "on many tokens: the correction truncates their weights"),
    "nonfinite": Failure(
        "nonfinite", "grpo", ("--reward-weights", "1e30,1e30", "--scale-rewards", "none"),
        ("--reward-weights", "1,1"),
        "rewards on a scale of 1e30 with Â not divided by the group's spread: the loss is still finite, its "
        "gradient overflows float32 and the updates are skipped"),
    "critic_not_learning": Failure(
        "critic_not_learning", "ppo-sentiment", ("--value-coef", "0"), ("--value-coef", "0.1"),
        "with no value loss the value head never leaves its start: V is a constant, explains none of the "
        "returns (EV = 0) and GAE's baseline is no baseline"),
    "entropy_collapse": Failure(
        "entropy_collapse", "cartpole", ("--lr", "0.07",), ("--lr", "2e-3", "--mu", "15"),
        "35 times the preset's learning rate: within a few updates the policy puts probability near 1 on one action "
        "and the pole soon falls, the same way every time; nothing else is tried again (the fix is the preset's "
        "rate and its 15 passes: at μ = 1, 16 updates are too few for the critic)",
        setting=("--mu", "1", "--total-steps", "4096")),
    "clip_too_high": Failure(
        "clip_too_high", "cartpole", ("--mu", "100", "--lr", "4e-2", "--clip-eps", "0.1"),
        ("--mu", "15", "--lr", "2e-3"),
        "a hundred passes at twenty times the learning rate inside a trust region of ±10 %: the batches are pushed "
        "past 1 ± ε, and a large share of the actions ends clipped in the last pass. A high clip fraction warns that "
        "the steps leave the trust region (the clip is doing its work, the run is fragile); it is no verdict on the "
        "return, and CartPole is forgiving: such a run may solve it all the same"),
}


def write_data(data_dir: Path) -> None:
    """The data files the entries name: 300 products of two three-digit numbers, as GSM8K rows (seeded)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "products.jsonl"
    if path.exists():
        return
    rng = random.Random(0)
    rows = []
    for _ in range(300):
        a, b = rng.randrange(100, 1000), rng.randrange(100, 1000)
        rows.append(json.dumps({"question": f"What is {a} * {b}?", "answer": str(a * b)}))
    partial = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer, threads too
    partial.write_text("\n".join(rows) + "\n")
    partial.replace(path)


def entry_flags(name: str, fixed: bool = False, seed: int = 0) -> tuple[str, list[str]]:
    """(rung, the run's flags with the data directory still a placeholder)."""
    if name not in GALLERY:
        raise KeyError(f"no gallery entry {name!r}; choose one of: {', '.join(GALLERY)}")
    failure = GALLERY[name]
    flags = [*failure.preset, *failure.breaks, *(failure.fix if fixed else ()), "--seed", str(seed)]
    return failure.rung, flags


def with_data(flags: list[str], cache_dir: str | os.PathLike) -> list[str]:
    """``flags`` with the data directory written out: ``cache_dir/data``, where the data files are written (and the
    cache directory made) if they are not there yet."""
    data = Path(cache_dir) / "data"
    write_data(data)
    return [flag.replace(DATA, str(data)) for flag in flags]


def healthy_flags(rung: str, seed: int = 0) -> list[str]:
    """The flags of a rung's healthy (shortened) tiny preset, with ``seed``."""
    return [*PRESETS[rung], "--seed", str(seed)]


def default_cache() -> Path:
    """``$LADDER_CACHE/gallery`` (default ``~/.cache/ladder/gallery``): one place for every process's runs."""
    from ladder.tasks.tiny_lm import cache_dir

    return cache_dir() / "gallery"

