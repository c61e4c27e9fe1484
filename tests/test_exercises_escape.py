"""No call escapes ``--use-exercises``: every rung reaches each function its exercises list through the one
table the swap replaces it in (``ladder.core.swappable.IMPLEMENTATIONS``), never by a reference that still
holds the core's own function.

For one short run of each rung, each swappable function is replaced in the table by a spy (a copy of the
core's function that counts its calls) while the core's own function is made to raise if anything still
calls it; the run must finish, and every function the rung's exercises name must have been called."""

from __future__ import annotations

import subprocess
import sys
import types
from collections import Counter
from contextlib import contextmanager

import pytest
import torch

from ladder import run
from ladder.core.swappable import IMPLEMENTATIONS
from ladder.graders import EXERCISES, ORIGINALS
from ladder.graders.swap import calls

GRPO = ["--preset", "tiny", "--steps", "1", "--eval-every", "0", "--eval-size", "8", "--prompts-per-step", "2"]
# Between them, the runs of a rung take every path its exercises lie on (the options that reach the rarer ones).
RUNS = {
    "reinforce": [["--total-steps", "600", "--eval-every", "600"]],
    "cartpole": [["--total-steps", "512", "--eval-every", "512"]],
    "ppo-sentiment": [["--preset", "tiny", "--steps", "1", "--batch-size", "8", "--ref-sync-every", "1"]],
    "grpo": [[*GRPO, "--algo", "rloo", "--kl-in", "reward", "--kl-coef", "0.04", "--ref-sync-every", "1",
              "--loss-type", "sapo"],
             [*GRPO, "--ratio-level", "sequence", "--sampler-dtype", "bfloat16", "--sampler-correction",
              "token_truncate"],
             [*GRPO, "--algo", "gdpo"]],
}


def _copy(function: types.FunctionType) -> types.FunctionType:
    twin = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                              function.__closure__)
    twin.__kwdefaults__ = function.__kwdefaults__
    return twin


def _raise_if_called(*args, **kwargs):
    raise AssertionError("the core's own function was called: a caller holds it outside the swap's namespace")


@contextmanager
def spies_in_place_of_the_core():
    """{function name: call count}, counted by spies in the namespaces; the core's own functions raise."""
    counts: Counter = Counter()
    poisoned = []
    for name, original in {e.function: e.core for e in EXERCISES if e.swap}.items():
        inner = getattr(original, "__wrapped__", original)        # soft_update is torch.no_grad()-wrapped
        twin = _copy(inner) if inner is original else torch.no_grad()(_copy(inner))

        def spy(*args, _twin=twin, _name=name, **kwargs):
            counts[_name] += 1
            return _twin(*args, **kwargs)

        poisoned.append((inner, inner.__code__))
        inner.__code__ = _raise_if_called.__code__
        IMPLEMENTATIONS[name] = spy
    try:
        yield counts
    finally:
        for inner, code in poisoned:
            inner.__code__ = code
        for e in EXERCISES:
            IMPLEMENTATIONS[e.function] = ORIGINALS[e.function]


@pytest.mark.parametrize("rung", RUNS)
def test_every_function_a_rung_lists_is_called_through_the_swap(rung, tmp_path):
    with spies_in_place_of_the_core() as counts:
        for i, args in enumerate(RUNS[rung]):
            assert run.main([rung, *args, "--no-progress", "--out", str(tmp_path / f"run{i}")]) == 0
    assert ORIGINALS["gae"].__code__ is not _raise_if_called.__code__          # the core's own are back
    missed = sorted({e.function for e in calls(rung)} - set(counts))
    assert not missed, f"{rung} never called {missed} through ladder's namespace"


def test_a_run_without_use_exercises_loads_neither_the_grader_nor_transformers(tmp_path):
    script = (f"import sys; from ladder import run; "
              f"run.main(['cartpole', '--total-steps', '512', '--eval-every', '512', '--no-progress', "
              f"'--out', {str(tmp_path / 'run')!r}]); "
              "print(sorted(m for m in ('transformers', 'ladder.graders', 'ladder.graders.grading') "
              "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]", out
