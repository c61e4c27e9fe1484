"""Reward functions for GRPO: the built-in rule rewards and the user's own, called safely.

A reward function maps completions (and the reference answers) to one number each:

    fn(completions: list[str], answers: list[str]) -> list[float]

``--reward-funcs`` names built-ins (``correctness``, ``format``) or ``FILE.py:FUNCTION`` /
``MODULE:FUNCTION``; the total reward is r_i = Σ_f w_f · f(completion_i). A function that raises,
returns the wrong number of rewards or a non-finite one stops the run with one line naming the
function and the completion.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

import torch

from ladder.runlog import UsageError
from ladder.tasks import arithmetic


def load_reward_function(spec: str) -> tuple[str, Callable]:
    """A built-in name, ``FILE.py:FUNCTION`` or ``MODULE:FUNCTION`` → (its name, the function)."""
    if spec in arithmetic.REWARD_FUNCTIONS:
        return spec, arithmetic.REWARD_FUNCTIONS[spec]
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise UsageError(f"--reward-funcs: {spec!r} is neither a built-in ({', '.join(arithmetic.REWARD_FUNCTIONS)}) "
                         f"nor FILE.py:FUNCTION / MODULE:FUNCTION")
    try:
        if where.endswith(".py"):
            module_spec = importlib.util.spec_from_file_location(Path(where).stem, where)
            if module_spec is None or not Path(where).is_file():
                raise FileNotFoundError(where)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        fn = getattr(module, attr)
    except Exception as e:  # noqa: BLE001 - whatever the user's file does wrong, it is one line for them
        raise UsageError(f"--reward-funcs: cannot load {spec!r} ({type(e).__name__}: {_one_line(e)})") from None
    if not callable(fn):
        raise UsageError(f"--reward-funcs: {spec!r} is not a function")
    return attr, fn


def _specs(funcs: str) -> list[str]:
    specs = [spec.strip() for spec in funcs.split(",") if spec.strip()]
    names = [spec.rpartition(":")[2] for spec in specs]
    if not specs or len(set(names)) < len(names):
        raise UsageError(f"--reward-funcs needs one or more functions with distinct names, got {funcs!r}")
    return specs


def load_all(funcs: str) -> dict[str, Callable]:
    """``"correctness,format,my.py:fn"`` → name → function (a user's file is imported here)."""
    return dict(load_reward_function(spec) for spec in _specs(funcs))


def weights(funcs: str, weights_text: str | None) -> dict[str, float]:
    """Name → weight w_f: ``weights_text`` has one number per function (None: all 1)."""
    names = [spec.rpartition(":")[2] for spec in _specs(funcs)]
    if weights_text is None:
        return dict.fromkeys(names, 1.0)
    try:
        values = [float(w) for w in weights_text.split(",")]
    except ValueError:
        values = []
    if len(values) != len(names):
        raise UsageError(f"--reward-weights needs {len(names)} numbers ({','.join(names)}), got {weights_text!r}")
    return dict(zip(names, values))


def _one_line(error: Exception, limit: int = 120) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _sample(completions: list[str], i: int) -> str:
    text = completions[i] if len(completions[i]) <= 60 else completions[i][:59] + "…"
    return f"completion {i}: {text!r}"


def call_reward(name: str, fn: Callable, completions: list[str], answers: list[str]) -> torch.Tensor:
    """``fn(completions, answers)`` as a float tensor ``[N]``; a failing, short or non-finite result is one line."""
    try:
        values = fn(completions, answers)
    except Exception as e:  # noqa: BLE001 - the user's function: name it and the sample it failed on
        where = ""
        for i in range(len(completions)):  # find the first sample it fails on alone
            try:
                fn(completions[i:i + 1], answers[i:i + 1])
            except Exception:  # noqa: BLE001
                where = f" on {_sample(completions, i)}"
                break
        where = where or f" on the batch of {len(completions)} completions (each one alone scores fine)"
        raise UsageError(f"reward function {name!r} raised {type(e).__name__}: {_one_line(e)}{where}") from None
    try:
        rewards = torch.tensor([float(v) for v in values], dtype=torch.float32)
    except (TypeError, ValueError):
        raise UsageError(f"reward function {name!r} must return a list of numbers, "
                         f"got {_one_line(ValueError(repr(values)), 80)}") from None
    if len(rewards) != len(completions):
        raise UsageError(f"reward function {name!r} returned {len(rewards)} rewards for {len(completions)} completions")
    bad = (~torch.isfinite(rewards)).nonzero()
    if len(bad):
        i = int(bad[0])
        raise UsageError(f"reward function {name!r} returned {rewards[i].item()} for {_sample(completions, i)}; "
                         f"rewards must be finite numbers")
    return rewards


def score(completions: list[str], answers: list[str], weights: dict[str, float],
          functions: dict[str, Callable] | None = None) -> tuple[torch.Tensor, dict]:
    """r_i = Σ_f w_f · f(completion_i), and each function's rewards for the logs."""
    functions = functions if functions is not None else {name: arithmetic.REWARD_FUNCTIONS[name] for name in weights}
    per_function = {name: call_reward(name, fn, completions, answers) for name, fn in functions.items()}
    total = sum(weights[name] * r for name, r in per_function.items())
    return total, per_function


def overlong_penalty(lengths: torch.Tensor, max_tokens: int, buffer: int, penalty: float = 1.0) -> torch.Tensor:
    """DAPO's soft overlong punishment: a reward that falls linearly over the last ``buffer`` tokens.

        R(L) = 0                                  L ≤ L_max − L_buf
        R(L) = −p · (L − (L_max − L_buf)) / L_buf  L_max − L_buf < L ≤ L_max

    so a completion that uses the whole budget gets −p, one that stops in time gets nothing.
    """
    over = (lengths.float() - (max_tokens - buffer)).clamp(min=0.0, max=float(buffer))
    return -penalty * over / buffer
