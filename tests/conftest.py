"""Fixtures several test files share: the tiny saved models, the GRPO runs' data files and spies.

The helpers that are not fixtures live in the helper modules (``lm_helpers``, ``trl_helpers``,
``core_update_helpers``, ``core_loss_refs``, ``planted_bugs``, ``cli_helpers``), imported here only
when a fixture is first used: collecting the tests loads nothing more."""

from __future__ import annotations

import json
import os
import sys

import pytest

# One CPU thread for torch here and in every process a test starts (``python -m ladder.run``, ``pytest
# exercises/``, the notebooks' kernels): the tiny models are too small to gain from a second thread, and
# two threads per process on a shared two-core machine spin against each other (several times slower).
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # imported before this file (by a plugin): set it there too
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

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

    monkeypatch.setattr(grpo, "sample", spy)
    return rollouts


@pytest.fixture(scope="session")
def parity_model_dir(tmp_path_factory):
    """The TRL parity tests' tiny Qwen2 (``trl_helpers.save_parity_model``), saved once for both trainers."""
    from trl_helpers import save_parity_model

    return save_parity_model(tmp_path_factory.mktemp("tiny-qwen-parity"))
