"""What a rung is: the names ``python -m ladder.run`` reads from a rung's module, and nothing else.

A rung is a module (``ladder.rungs.reinforce``, ``cartpole``, ``ppo_sentiment``, ``grpo``, ``lm_eval``) that
declares every member of ``Rung``. The optional parts have a stated default here, which a rung without one of
its own names explicitly (``ALGOS = {}``, ``WRITES = TRAINING_WRITES``, ``validate = no_cross_option_rules``,
``export = no_export``), so the command line never guesses what a rung lacks. Each rung keeps its own rules
(which options relate, which values are decided when the run starts, what ``--export-trl`` means) inside
itself; ``tests/test_rung_protocol.py`` checks every rung against this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from ladder.runtime.errors import UsageError

TRAINING_WRITES = "metrics.jsonl, summary.json, curves.png"  # what a training run writes in OUT


@runtime_checkable
class Rung(Protocol):
    """A rung module. ``Config`` is a ``ladder.cli.Checked`` dataclass: one ``--flag`` per field."""

    NAME: str  # the rung's name on the command line (python -m ladder.run NAME)
    Config: type
    PRESETS: Mapping[str, Mapping[str, Any]]  # --preset NAME → option values ({}: no presets)
    ALGOS: Mapping[str, Mapping[str, Any]]  # --algo NAME → option values ({}: the rung has no --algo)
    WRITES: str  # the files the run reports it wrote in OUT (TRAINING_WRITES for a training run)
    RESOLVED: Mapping[str, Callable[[Any], Any]]  # option → its value in the run, decided when it starts

    def validate(self, cfg: Any) -> None:
        """Raise ``UsageError`` for a combination of options that makes no sense (each option's own domain
        is checked when the Config is built)."""

    def train(self, cfg: Any) -> dict:
        """Run the rung; return its summary."""

    def export(self, cfg: Any) -> dict | None:
        """The run written out instead of trained (grpo ``--export-trl FILE``): its summary; None: train."""


def no_cross_option_rules(cfg: Any) -> None:
    """``validate`` of a rung whose options are independent: each option's domain is checked when the Config
    is built."""


def no_export(cfg: Any) -> None:
    """``export`` of a rung that always trains."""


def check_minibatches(rows: int, num_minibatches: int, batch: str) -> None:
    """A batch of ``rows`` rows must split into M = ``num_minibatches`` equal minibatches of rows / M
    (``core.Batch.minibatches``); ``batch`` names it in the rung's words ("a batch of 64 completions")."""
    if rows % num_minibatches:
        raise UsageError(f"{batch} cannot be split into {num_minibatches} equal minibatches")
