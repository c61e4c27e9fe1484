"""What a rung is: a module of ``ladder.rungs`` that declares itself in one ``RUNG = Rung(...)`` and holds the code
the command line runs (``RungCode``). Nothing else names a rung: ``ladder.rungs.registry`` finds every declaration,
and the command line (``python -m ladder.run``: the rungs' list, their flags, ``--export-trl``), the graders (which
exercises a rung's update calls) and the doctor (a run's vital signs) read them there.

    RUNG = Rung(name="cartpole", position=2, summary="PPO on CartPole (actor-critic, vector envs, GAE)",
                exercises=("ex03_gae", ...), vitals=("return", ...))

Each rung keeps its own rules (which options relate: ``validate``; which values are decided when the run starts:
``RESOLVED``) inside itself; ``tests/test_rung_protocol.py`` checks every rung against this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ladder.runtime.errors import UsageError

TRAINING_WRITES = "metrics.jsonl, summary.json, curves.png"  # what a training run writes in OUT


@dataclass(frozen=True)
class Words:
    """What the doctor says about a failure signature (``ladder.doctor.wording``): its title, whether it is a problem,
    what it means, what to change in ladder and in TRL, and the notebook section that explains it."""

    title: str
    severity: str  # "harmless" | "problem"
    means: str
    ladder: str  # what to change: the ladder flag …
    trl: str  # … and TRL's name for it
    section: tuple[str, str]  # (file, heading as written there)


@dataclass(frozen=True)
class Rung:
    """A rung as it declares itself (``RUNG`` in its module), read by the registries."""

    name: str                          # python -m ladder.run NAME
    position: int                      # its place on the ladder: the order of the rungs' list
    summary: str                       # its line in ``python -m ladder.run --help``
    writes: str = TRAINING_WRITES      # the files a run reports it wrote in OUT
    export: str | None = None          # --export-trl FILE: "module:function(cfg, path) -> summary" writing the run
    #                                    as a TRL script instead of training it (None: the rung has no export)
    exercises: tuple[str, ...] = ()    # the exercises whose functions its update can call (--use-exercises)
    vitals: tuple[str, ...] = ()       # the doctor's vital signs of its runs (``ladder.doctor.vitals.VITALS``' names)
    words: Mapping[str, Words] = field(default_factory=dict, hash=False)  # signature → the doctor's words for it
    #                                    where it means something else on this rung (else the common ones)
    trl_classes: tuple[str, ...] = ()  # the TRL classes its options map to (``ladder.trl.map``: the rows of its
    #                                    options' ``TRL`` names in these classes)
    trl: tuple = ()                    # TRL settings it has no flag for (``ladder.trl_rows.TRL``)


@runtime_checkable
class RungCode(Protocol):
    """A rung module's code. ``Config`` is a ``ladder.options.Checked`` dataclass: one ``--flag`` per field."""

    RUNG: Rung
    Config: type
    PRESETS: Mapping[str, Mapping[str, Any]]  # --preset NAME → option values ({}: no presets)
    ALGOS: Mapping[str, Mapping[str, Any]]  # --algo NAME → option values ({}: the rung has no --algo)
    RESOLVED: Mapping[str, Callable[[Any], Any]]  # option → its value in the run, decided when it starts

    def validate(self, cfg: Any) -> None:
        """Raise ``UsageError`` for a combination of options that makes no sense (each option's own domain
        is checked when the Config is built)."""

    def train(self, cfg: Any) -> dict:
        """Run the rung; return its summary."""


def no_cross_option_rules(cfg: Any) -> None:
    """``validate`` of a rung whose options are independent: each option's domain is checked when the Config
    is built."""


def check_minibatches(rows: int, num_minibatches: int, batch: str) -> None:
    """A batch of ``rows`` rows must split into M = ``num_minibatches`` equal minibatches of rows / M
    (``core.Batch.minibatches``); ``batch`` names it in the rung's words ("a batch of 64 completions")."""
    if rows % num_minibatches:
        raise UsageError(f"{batch} cannot be split into {num_minibatches} equal minibatches")
