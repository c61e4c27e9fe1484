"""What a run is read into, whichever program wrote it: its metrics as named ``Series`` (step → value), its config
as ``Facts``, both in a ``Run`` with the notes on what was left out.

A log's records become series here, the same way for a ladder run and a TRL run: ``stepped`` keeps the records
whose step is usable, ``series_of`` takes each record's numbers at its step under ladder's names; what is not
usable (a step that is not a whole number ≥ 0, a value that is not a number) is left out and noted in ``Logged``,
one line per kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ladder.doctor.log_values import NOT_A_NUMBER, as_number, as_step, shown
from ladder.runtime.errors import UsageError


@dataclass
class Series:
    """One metric over the run: ``steps[i]`` → ``values[i]``, finite values only, in step order."""

    steps: list[int]
    values: list[float]

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Facts:
    """The config a signature needs: μ passes × M minibatches per batch, the loss aggregation, lr, LoRA, …"""

    algorithm: str
    mu: int | None = None
    minibatches: int | None = None
    loss_type: str | None = None
    lr: float | None = None
    lora: bool | None = None
    max_new_tokens: int | None = None
    kl_coef: float | None = None  # β: ppo-sentiment's and grpo's --kl-coef, dpo's --beta, TRL's beta
    sampler_correction: str | None = None
    value_coef: float | None = None
    unweighted: frozenset[str] = frozenset()  # reward functions logged with weight 0: not in the objective
    assumed: set[str] = field(default_factory=set)  # facts not read from the run: a default taken

    def shown(self, fact: str) -> str:
        value = getattr(self, fact)
        return f"{value} (assumed)" if fact in self.assumed else str(value)

    @property
    def updates_per_batch(self) -> int | None:
        """μ·M: optimiser steps on one batch. 1 means π_old = π_θ at every step (ratio ≡ 1)."""
        if self.mu is None or self.minibatches is None:
            return None
        return self.mu * self.minibatches


@dataclass
class Run:
    path: Path
    source: str  # "ladder" or "trl"
    rung: str
    series: dict[str, Series]
    facts: Facts
    completions: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. a torn last line left out
    unknown: list[str] = field(default_factory=list)  # config facts assumed, not read
    config: dict = field(default_factory=dict)  # the config as read: ladder's config.json, TRL's GRPOConfig fields

    def get(self, name: str) -> Series | None:
        found = self.series.get(name)
        return found if found is not None and len(found) else None


LEFT_OUT = {  # what a log can hold that the doctor leaves out: (one, many), as the notes say it
    "step": ("record whose step is not a whole number ≥ 0", "records whose step is not a whole number ≥ 0"),
    "value": ("value that is not a number", "values that are not numbers"),
    "entry": ("entry that is not a JSON object", "entries that are not JSON objects"),
}


@dataclass
class Logged:
    """A log's records, each with its place in the file (``line 4``) and its step; what was left out, by place."""

    source: str  # the file, as the notes name it
    records: list[tuple[str, int, dict]] = field(default_factory=list)
    left_out: dict[str, list[str]] = field(default_factory=dict)  # a LEFT_OUT key → the places, in order

    def leave_out(self, what: str, place: str) -> None:
        self.left_out.setdefault(what, []).append(place)

    def notes(self) -> list[str]:
        """One line per kind of thing left out: how many, and where the first was."""
        return [f"{self.source}: left out {len(places)} {LEFT_OUT[what][len(places) > 1]} (first: {places[0]})"
                for what, places in self.left_out.items()]


def stepped(path: Path, records: list[tuple[str, dict]]) -> Logged:
    """The records of the log at ``path`` whose step is usable (a record without one: its position + 1), in the
    file's order; none at all is bad input."""
    logged = Logged(path.name)
    for i, (place, record) in enumerate(records):
        step = as_step(record.get("step", i + 1))
        if step is None:
            logged.leave_out("step", f"{place}, step {shown(record.get('step'))}")
        else:
            logged.records.append((place, step, record))
    if records and not logged.records:
        raise UsageError(f"{path}: none of its {len(records)} records has a usable step "
                         f"({logged.left_out['step'][0]}); a step is a whole number ≥ 0")
    return logged


def series_of(logged: Logged, renames: dict[str, str], keep) -> dict[str, Series]:
    """Each record's numbers, renamed, at the record's step; a value that is not a number is left out and
    noted in ``logged``, a non-finite reading is left out."""
    series: dict[str, Series] = {}
    for place, step, record in logged.records:
        for key, value in record.items():
            name = renames.get(key, key if keep(key) else None)
            if name is None or key == "step":
                continue
            number = as_number(value)
            if number is NOT_A_NUMBER:
                logged.leave_out("value", f"{place}, {json.dumps(key)}: {shown(value)}")
            elif number is not None:
                series.setdefault(name, Series([], []))
                series[name].steps.append(step)
                series[name].values.append(number)
    return series
