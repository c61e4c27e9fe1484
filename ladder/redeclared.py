"""An option a rung inherits, declared again with another trainer's TRL names beside its own.

A rung that maps other TRL classes than the rung it extends (the distill rung: GKDConfig and GKDTrainer, where grpo
maps GRPOConfig and GRPOTrainer) names them where it declares its options, as every rung does: it re-declares the
parent's field with the same default, help and domain and its names extended, for a spec's flags one by one.

    redeclared(fields, classes, declared, *names, **by_flag)   the parent's field (by name) or a new ``option(...)``
    SAME_NAMES                                                  as names: the parent's own, in the new classes
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import replace

from ladder.specs import FixedSpec, Param, trl_names

SAME_NAMES = "the parent's names"  # in ``names``: each of the option's TRL names, moved to the new class


def _extended(names: tuple, given, classes: dict) -> tuple:
    """An option's TRL ``names`` and the new ones ``given`` (TRL declarations; SAME_NAMES: ``names``' own in the
    classes ``classes`` maps them to)."""
    extra = []
    for item in given if isinstance(given, tuple) else (given,):
        extra += ([replace(d, cls=classes[c]) for d in names for c in d.classes() if c in classes]
                  if item is SAME_NAMES else [item])
    return (*names, *extra)


def _param(p: Param, by_flag: dict, classes: dict) -> Param:
    if p.flag not in by_flag:
        return p
    given = by_flag[p.flag]
    if callable(p.trl):  # names read when asked (a registry's): so are these
        return replace(p, trl=lambda: _extended(trl_names(p), given, classes))
    return replace(p, trl=_extended(trl_names(p), given, classes))


def _spec(spec, by_flag: dict, classes: dict):
    """``spec`` with new names for some of its flags (a union's: its choice's only)."""
    flags = {p.flag for p in spec.params()} if isinstance(spec, FixedSpec) else {spec.choice.flag}
    if set(by_flag) - flags:
        raise ValueError(f"{spec.field} has no flag {sorted(set(by_flag) - flags)} to name")
    if isinstance(spec, FixedSpec):
        return FixedSpec(spec.field, spec.cls, tuple(_param(p, by_flag, classes) for p in spec.params()),
                         spec.placed())
    union = copy.copy(spec)
    union.choice = _param(spec.choice, by_flag, classes)
    return union


def redeclared(fields: dict, classes: dict, declared: str | dataclasses.Field, *names,
               **by_flag) -> dataclasses.Field:
    """The option ``declared`` — a parent's field by its name in ``fields``, or a rung's own ``option(...)`` — with
    ``names`` beside its TRL names (a plain field's), or ``by_flag`` (flag → names: a spec's flags'); ``classes``:
    parent class → new class, for SAME_NAMES."""
    f = fields[declared] if isinstance(declared, str) else declared
    metadata = dict(f.metadata)
    if metadata.get("spec"):
        metadata["spec"] = _spec(metadata["spec"], by_flag, classes)
    else:
        metadata["trl"] = _extended(tuple(metadata.get("trl", ())), names, classes)
    return dataclasses.field(default=f.default, metadata=metadata)
