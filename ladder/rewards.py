"""Reward functions for GRPO: the built-in rule rewards and the user's own, called safely.

A reward function maps completions (and the reference answers) to one number each:

    fn(completions: list[str], answers: list[str]) -> list[float]

``--reward-funcs`` names built-ins (``correctness``, ``format``) or ``FILE.py:FUNCTION`` /
``MODULE:FUNCTION``; the total reward is r_i = Σ_f w_f · f(completion_i). A function that raises,
does not return within ``--reward-timeout`` seconds (``TIME_LIMIT_S`` unless given; ``ladder.runtime.limits``),
returns something that is not a list, the wrong number of rewards, or an entry that is not a finite number
(None, text, NaN, ±inf) stops the run with one line naming the function and the completion. A user's module
or function that exits (``sys.exit``, or ``argparse`` parsing ladder's own command line) is one line too, at
import as at call: what the user's code prints is held while it runs and passed on once it returns
(``ladder.runtime.user_code``).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from collections.abc import Callable
from pathlib import Path

import torch

from ladder.runtime.errors import UsageError
from ladder.runtime.limits import TimedOut, time_limit
from ladder.runtime.user_code import exited, held_output, one_line, said
from ladder.tasks import arithmetic

TIME_LIMIT_S = 600.0  # seconds one call of a reward function may take, on a whole batch


def load_reward_function(spec: str) -> tuple[str, Callable]:
    """A built-in name, ``FILE.py:FUNCTION`` or ``MODULE:FUNCTION`` → (its name, the function)."""
    if spec in arithmetic.REWARD_FUNCTIONS:
        return spec, arithmetic.REWARD_FUNCTIONS[spec]
    name, fn = load_object(spec, "--reward-funcs")
    if not callable(fn):
        raise UsageError(f"--reward-funcs: {spec!r} is not a function")
    return name, fn


def load_object(spec: str, flag: str) -> tuple[str, object]:
    """``FILE.py:NAME`` or ``MODULE:NAME`` → (NAME, what the module holds under it), whatever it is; ``flag`` names the
    option in the one-line errors (the agent rung loads ``--env FILE.py:Class`` this way)."""
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise UsageError(f"{flag}: {spec!r} is neither a built-in ({', '.join(arithmetic.REWARD_FUNCTIONS)}) "
                         f"nor FILE.py:FUNCTION / MODULE:FUNCTION")
    printed = []
    try:
        with held_output(printed):
            module = _import(where)
        return attr, getattr(module, attr)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - whatever the user's file does wrong (sys.exit too): one line
        what = f"importing it called {exited(e)}" if exited(e) else f"{type(e).__name__}: {one_line(e)}"
        raise UsageError(f"{flag}: cannot load {spec!r} ({what}{said(printed)})") from None


def _import(where: str):
    """``FILE.py`` (from its path) or ``MODULE`` (from the import path)."""
    if not where.endswith(".py"):
        return importlib.import_module(where)
    module_spec = importlib.util.spec_from_file_location(Path(where).stem, where)
    if module_spec is None or not Path(where).is_file():
        raise FileNotFoundError(where)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


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


def _sample(completions: list[str], i: int) -> str:
    text = completions[i] if len(completions[i]) <= 60 else completions[i][:59] + "…"
    return f"completion {i}: {text!r}"


def as_number(value) -> float | None:
    """``value`` as a float if it is a real number (int, float, bool, a NumPy scalar, a one-element tensor), else
    None: None, text (even text that reads as a number), a list…"""
    if value is None or isinstance(value, (str, bytes)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def described(value, limit: int = 40) -> str:
    """What a user's code returned, for a one-line error: ``None``, a float as such (``nan``, ``-inf``), else its type
    and its repr, shortened: ``int 5``, ``str 'high'``, ``list [1, 2]``."""
    if value is None or type(value) is float:
        return repr(value)
    text = " ".join(repr(value).split())
    return f"{type(value).__name__} {text if len(text) <= limit else text[:limit - 1] + '…'}"


def _first_failing(fn: Callable, completions: list[str], answers: list[str], seconds: float | None,
                   what: str) -> str:
    """`` on completion i: '…'``: the first sample ``fn`` fails on alone, or the batch's size if none does (nor
    when the search itself runs past ``seconds``)."""
    batch = f" on the batch of {len(completions)} completions"
    try:
        with time_limit(seconds, what):
            for i in range(len(completions)):
                try:
                    with held_output(None):
                        fn(completions[i:i + 1], answers[i:i + 1])
                except (Exception, SystemExit):  # noqa: BLE001 - any failure of the user's function on this one
                    return f" on {_sample(completions, i)}"
    except TimedOut as e:
        if e.what != what:
            raise
        return batch
    return f"{batch} (each one alone scores fine)"


def call_reward(name: str, fn: Callable, completions: list[str], answers: list[str],
                seconds: float | None = TIME_LIMIT_S) -> torch.Tensor:
    """``fn(completions, answers)`` as a float tensor ``[N]``, within ``seconds``; a failing, late, short or
    non-numeric result is one line."""
    what, printed = f"reward function {name!r}", []
    try:
        with held_output(printed), time_limit(seconds, what):
            values = fn(completions, answers)
    except TimedOut as e:
        if e.what != what:
            raise
        raise UsageError(f"{e} on the batch of {len(completions)} completions{said(printed)}") from None
    except (Exception, SystemExit) as e:  # the user's function (sys.exit too): name it and the sample
        where = _first_failing(fn, completions, answers, seconds, what)
        how = f"called {exited(e)}" if exited(e) else f"raised {type(e).__name__}: {one_line(e)}"
        raise UsageError(f"{what} {how}{where}{said(printed)}") from None
    return _checked_rewards(what, values, completions)


def _checked_rewards(what: str, values, completions: list[str]) -> torch.Tensor:
    """``values`` as a tensor ``[N]`` if they are N finite numbers, else one line naming the first that is not."""
    try:
        listed = None if isinstance(values, (str, bytes, dict)) else list(values)
    except TypeError:
        listed = None
    if listed is None:
        raise UsageError(f"{what} must return a list of numbers, one per completion, got {described(values)}")
    values = listed
    if len(values) != len(completions):
        raise UsageError(f"{what} returned {len(values)} rewards for {len(completions)} completions")
    for i, value in enumerate(values):
        number = as_number(value)
        if number is None or not math.isfinite(number):
            raise UsageError(f"{what} returned {described(value)} for {_sample(completions, i)}; rewards must be "
                             f"finite numbers")
    return torch.tensor([as_number(v) for v in values], dtype=torch.float32)


def score(completions: list[str], answers: list[str], weights: dict[str, float],
          functions: dict[str, Callable] | None = None, seconds: float | None = TIME_LIMIT_S
          ) -> tuple[torch.Tensor, dict]:
    """r_i = Σ_f w_f · f(completion_i), and each function's rewards for the logs; each call within ``seconds``."""
    functions = functions if functions is not None else {name: arithmetic.REWARD_FUNCTIONS[name] for name in weights}
    per_function = {name: call_reward(name, fn, completions, answers, seconds) for name, fn in functions.items()}
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
