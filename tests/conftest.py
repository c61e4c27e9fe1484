"""Fixtures several test files share: the tiny saved models, the GRPO runs' data files and spies.

The helpers that are not fixtures live in the helper modules (``lm_helpers``, ``trl_helpers``,
``core_update_helpers``, ``core_loss_refs``, ``planted_bugs``, ``cli_helpers``), imported here only
when a fixture is first used: collecting the tests loads nothing more."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

# One CPU thread for torch here and in every process a test starts (``python -m ladder.run``, ``pytest
# exercises/``, the notebooks' kernels): the tiny models are too small to gain from a second thread, and
# two threads per process on a shared two-core machine spin against each other (several times slower).
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # imported before this file (by a plugin): set it there too
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# Offline, with a Hugging Face cache of this session's own (empty): no test reads the hub or what a developer has
# cached, here and in every process a test starts (the fork server of ``cli_helpers.run_cli`` included, whose
# libraries read these variables once, when imported).
os.environ["HF_HUB_OFFLINE"] = "1"
if "LADDER_TESTS_HF_HOME" not in os.environ:  # one per session: pytest-xdist's workers inherit it
    os.environ["LADDER_TESTS_HF_HOME"] = tempfile.mkdtemp(prefix="ladder-tests-hf-")
    atexit.register(shutil.rmtree, os.environ["LADDER_TESTS_HF_HOME"], ignore_errors=True)
os.environ["HF_HOME"] = os.environ["LADDER_TESTS_HF_HOME"]

# Rewards with a spread on a random model (the built-in ones are all 0 there, so nothing would move).
REWARDS = '''
def length(completions, answers):
    return [len(c) / 10 for c in completions]


def parity(completions, answers):
    return [float(len(c) % 2) for c in completions]
'''


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory):
    """A Qwen2-architecture model with a chat template, random weights, saved like a hub snapshot."""
    from lm_helpers import save_tiny_qwen

    return save_tiny_qwen(tmp_path_factory.mktemp("tiny-qwen"))


@pytest.fixture(scope="session")
def grpo_files(tmp_path_factory):
    """The GSM8K-style rows as a local dataset, and the ``length`` and ``parity`` reward functions."""
    from lm_helpers import GSM8K_ROWS

    root = tmp_path_factory.mktemp("grpo-data")
    (root / "gsm8k.jsonl").write_text("\n".join(json.dumps(r) for r in GSM8K_ROWS))
    (root / "rewards.py").write_text(REWARDS)
    return {"gsm8k": str(root / "gsm8k.jsonl"), "length": f"{root / 'rewards.py'}:length",
            "parity": f"{root / 'rewards.py'}:parity"}


@pytest.fixture
def spy_grpo_update(monkeypatch):
    """Every core.update call: (policy, batch, cfg, log π_θ and log π_ref of the batch before the update)."""
    import ladder.core

    calls = []
    real = ladder.core.update

    def spy(policy, batch, optimizer, cfg, *args, **kwargs):
        before = policy.old_logp_and_values(batch)[0].float()
        calls.append((policy, batch, cfg, before, policy.ref_logp(batch)))
        return real(policy, batch, optimizer, cfg, *args, **kwargs)

    monkeypatch.setattr(ladder.core, "update", spy)
    return calls


@pytest.fixture
def spy_grpo_rollouts(monkeypatch):
    """Every rollout grpo.train sampled (before dynamic sampling picks groups)."""
    from ladder.rungs import grpo

    rollouts = []
    real = grpo.sample

    def spy(*args, **kwargs):
        rollouts.append(real(*args, **kwargs))
        return rollouts[-1]

    monkeypatch.setattr(grpo.step, "sample", spy)
    return rollouts


@pytest.fixture(scope="session")
def parity_model_dir(tmp_path_factory):
    """The TRL parity tests' tiny Qwen2 (``trl_helpers.save_parity_model``), saved once for both trainers."""
    from trl_helpers import save_parity_model

    return save_parity_model(tmp_path_factory.mktemp("tiny-qwen-parity"))


@pytest.fixture(scope="session")
def _solution_grades():
    return {}


@pytest.fixture
def solutions_graded_once(monkeypatch, _solution_grades):
    """``grade_file`` on the repository's ``solutions/``: graded for real the first time in the session, then
    that same Result (the solutions do not change while the tests run, and grading ex20 alone trains 14 GRPO
    steps). Any other directory — a learner's copy, stubs, a planted bug — is graded every time."""
    from pathlib import Path

    from ladder.graders import grading, swap

    real = grading.grade_file
    solutions = (Path(__file__).resolve().parents[1] / "solutions").resolve()

    def grade_file(directory, exercise):
        if Path(directory).resolve() != solutions:
            return real(directory, exercise)
        if exercise.stem not in _solution_grades:
            _solution_grades[exercise.stem] = real(directory, exercise)
        return _solution_grades[exercise.stem]

    monkeypatch.setattr(grading, "grade_file", grade_file)
    monkeypatch.setattr(swap, "grade_file", grade_file)
    return grade_file


@pytest.fixture(scope="module")
def core_grpo_steps_once():
    """The graders' GRPO step on the core's own ``grpo_step`` (the oracle of ex20's cases): run once per case
    in the module, then the same (record, policy, advantages), which the grader only compares with. Not for
    a module that swaps exercises in: there the core's step calls the learner's functions."""
    from ladder.graders import ORIGINALS, cases_loop

    real, core, done = cases_loop.run_grpo_step, ORIGINALS["grpo_step"], {}

    def run_grpo_step(grpo_step, **overrides):
        if grpo_step is not core:
            return real(grpo_step, **overrides)
        key = tuple(sorted(overrides.items()))
        if key not in done:
            done[key] = real(grpo_step, **overrides)
        return done[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cases_loop, "run_grpo_step", run_grpo_step)
        yield


@pytest.fixture(scope="session")
def tiny_grpo_run(tmp_path_factory):
    """``cli_helpers.TINY_GRPO_ARGS`` run once, as a user would, for every test that only reads what it printed
    and wrote: (the finished process, its run directory). A test must not change the directory."""
    from cli_helpers import TINY_GRPO_ARGS, run_cli

    where = tmp_path_factory.mktemp("tiny-grpo-run")
    result = run_cli(*TINY_GRPO_ARGS, "--out", str(where / "run"), cwd=where)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, where / "run"


@pytest.fixture
def cli(capsys):
    """``python -m ladder.run ARGS`` in this process (as ``main`` runs it): its exit code, stdout and stderr."""
    from ladder import run as ladder_run

    def run_cli(*args) -> subprocess.CompletedProcess:
        capsys.readouterr()
        try:
            code = ladder_run.main([str(a) for a in args])
        except SystemExit as e:  # bad input: ``die`` exits with 2
            code = e.code
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, captured.out, captured.err)
    return run_cli
