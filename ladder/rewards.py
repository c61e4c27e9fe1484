"""Reward functions for GRPO: the built-in rule rewards and the user's own, called safely.

A reward function maps completions (and the reference answers) to one number each:

    fn(completions: list[str], answers: list[str]) -> list[float]

``--reward-funcs`` names built-ins (``correctness``, ``format``) or ``FILE.py:FUNCTION`` /
``MODULE:FUNCTION``; the total reward is r_i = Σ_f w_f · f(completion_i). A function that raises,
returns the wrong number of rewards or a non-finite one stops the run with one line naming the
function and the completion. A user's module or function that exits (``sys.exit``, or ``argparse``
parsing ladder's own command line) is one line too, at import as at call: what the user's code prints
is held while it runs and passed on once it returns.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import sys
from collections.abc import Callable
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import torch

from ladder.runlog import UsageError
from ladder.tasks import arithmetic


def load_reward_function(spec: str, flag: str = "--reward-funcs") -> tuple[str, Callable]:
    """A built-in name, ``FILE.py:FUNCTION`` or ``MODULE:FUNCTION`` → (its name, the function); ``flag`` names the
    option in the one-line errors (the agent rung loads ``--env FILE.py:Class`` the same way)."""
    if spec in arithmetic.REWARD_FUNCTIONS:
        return spec, arithmetic.REWARD_FUNCTIONS[spec]
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise UsageError(f"{flag}: {spec!r} is neither a built-in ({', '.join(arithmetic.REWARD_FUNCTIONS)}) "
                         f"nor FILE.py:FUNCTION / MODULE:FUNCTION")
    printed = []
    try:
        with _output_held(printed):
            module = _import(where)
        fn = getattr(module, attr)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - whatever the user's file does wrong (sys.exit too): one line
        what = f"importing it called {_exited(e)}" if _exited(e) else f"{type(e).__name__}: {_one_line(e)}"
        raise UsageError(f"{flag}: cannot load {spec!r} ({what}{_printed(printed)})") from None
    if not callable(fn):
        raise UsageError(f"{flag}: {spec!r} is not a function")
    return attr, fn


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


@contextmanager
def _output_held(printed: list[str] | None):
    """What the user's code prints while inside is held: passed on if it returns (``printed`` None: dropped).
    If it raises or exits, nothing is passed on, so that the error stays one line, and its last printed
    line goes into ``printed`` (argparse prints its usage and the error, then exits)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            yield
    except BaseException:
        if printed is not None:
            printed.extend([line for line in (out.getvalue() + err.getvalue()).splitlines() if line.strip()][-1:])
        raise
    if printed is not None:
        sys.stdout.write(out.getvalue())
        sys.stderr.write(err.getvalue())


def _exited(error: BaseException) -> str | None:
    """``sys.exit(2)`` for an exit, None for an exception."""
    return f"sys.exit({'' if error.code is None else repr(error.code)})" if isinstance(error, SystemExit) else None


def _printed(printed: list[str]) -> str:
    return f"; it printed {_one_line(printed[-1], 100)!r}" if printed else ""


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


def _one_line(error: BaseException | str, limit: int = 120) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _sample(completions: list[str], i: int) -> str:
    text = completions[i] if len(completions[i]) <= 60 else completions[i][:59] + "…"
    return f"completion {i}: {text!r}"


def _first_failing(fn: Callable, completions: list[str], answers: list[str]) -> str:
    """`` on completion i: '…'``: the first sample ``fn`` fails on alone, or the batch's size if none does."""
    for i in range(len(completions)):
        try:
            with _output_held(None):
                fn(completions[i:i + 1], answers[i:i + 1])
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001
            return f" on {_sample(completions, i)}"
    return f" on the batch of {len(completions)} completions (each one alone scores fine)"


def call_reward(name: str, fn: Callable, completions: list[str], answers: list[str]) -> torch.Tensor:
    """``fn(completions, answers)`` as a float tensor ``[N]``; a failing, short or non-finite result is one line."""
    printed = []
    try:
        with _output_held(printed):
            values = fn(completions, answers)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - the user's function (sys.exit too): name it and the sample
        where = _first_failing(fn, completions, answers)
        what = f"called {_exited(e)}" if _exited(e) else f"raised {type(e).__name__}: {_one_line(e)}"
        raise UsageError(f"reward function {name!r} {what}{where}{_printed(printed)}") from None
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
