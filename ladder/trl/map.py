"""TRL's names → ladder's options → the ``ladder.core`` function that computes them, generated from the options.

An option declares its TRL names where it is declared (``TRL`` in ``option(..., trl=...)`` or ``Param(..., trl=...)``,
``ladder.trl_rows``); a rung declares the TRL classes it maps (``Rung.trl_classes``) and the TRL settings it has no
flag for (``Rung.trl``). The map is made from those when asked, one row per (TRL name, ladder option) pair::

    Mapping(trl_class, trl_field, ladder_rung, ladder_option, core_function, note, value, applies, config)

``ladder_option`` is the option's flag name as the option itself gives it (nothing names it a second time), None for
a rung's setting with no flag. ``trl_class`` is a TRL config (``GRPOConfig``, ``RLOOConfig``; ``PPOConfig`` is the
*classic* one of the RLHF articles, TRL ≤ 0.11, which TRL 1.16 no longer ships, not even under ``trl.experimental``),
a trainer's argument (``GRPOTrainer``: ``__init__``'s parameters; ``GRPOTrainer.train``), the classic
``PPOTrainer``'s methods, or the module ``trl.rewards``. ``trl_field`` None: the ladder option has no TRL equivalent
(the note says what to do instead). ``core_function`` names an attribute of ``ladder.core``.

``value(cfg)`` (the exported configs' rows) is the TRL value that reproduces a run; ``ladder.trl.export`` builds its
``GRPOConfig`` from these rows and nothing else. ``applies(cfg)`` says whether a row concerns this run (None: always):
a conditional mapping (``epsilon_high`` is ``clip_eps_high``, or ``cispo_max_weight`` with ``--loss-type cispo``: a
flag of a spec the run does not hold does not apply), or for a row without a TRL field, whether the run really uses
the option TRL cannot reproduce. A row concerns the runs of its rung's Config (``config``) and of a Config that
extends it: the agent's runs are grpo's rows and the agent's own (an option it inherits with the same TRL names is
grpo's row, in the classes grpo maps). The distill rung maps ``GKDConfig`` and ``GKDTrainer``: its options, grpo's
among them, re-declare their names there (``ladder.rungs.distill.options``).

    >>> from ladder.trl import map as trl_map
    >>> [r.ladder_option for r in trl_map.for_field("GRPOConfig", "num_iterations")]
    ['mu']
    >>> [r.trl_field for r in trl_map.for_option("kl_coef", rung="ppo-sentiment") if r.trl_class == "PPOConfig"]
    ['init_kl_coef']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ladder.options import layout, option_name
from ladder.rungs import registry
from ladder.specs import option_value, spec_fields, trl_names
from ladder.trl_rows import CLASSIC, CLASSIC_PPO_CONFIG_FIELDS, SAME, SCHEDULE, TRL, Mapping, optimizer_steps

__all__ = ["CLASSIC", "CLASSIC_PPO_CONFIG_FIELDS", "Mapping", "optimizer_steps", "all_rows", "rung_rows", "SCHEDULE",
           "rows", "trl_classes", "for_field", "for_option", "ladder_options", "not_in_trl", "trl_values"]

# --- the map, generated from the options' declarations ----------------------------------------------------------

def same(option: str) -> Callable[[Any], Any]:
    """The TRL value that is the option's own (``TRL(..., value=SAME)``)."""
    def value(cfg):
        return option_value(cfg, option)

    value.__qualname__ = value.__name__ = f"same_{option}"
    return value


def _read_by_run(spec, flag: str) -> Callable[[Any], bool]:
    """Whether the run's spec reads ``flag``: a union's flag is read where the class it holds reads it."""
    def applies(cfg) -> bool:
        return flag in spec.flat(cfg)

    return applies


def _both(first: Callable | None, second: Callable | None) -> Callable | None:
    if first is None or second is None:
        return first or second
    return lambda cfg: first(cfg) and second(cfg)


def _row(decl: TRL, cls: str, rung, option: str | None, condition: Callable | None) -> Mapping:
    value = same(option) if decl.value == SAME else decl.value
    applies = decl.applies if decl.always else _both(condition, decl.applies)
    return Mapping(cls, decl.field, rung.RUNG.name, option, decl.core, decl.note, value, applies, rung.Config)


def _options(config) -> list[tuple[Any, Any]]:
    """(layout item, the union spec that reads it where only some runs do, else None) of every option of ``config``."""
    owner = {p.flag: spec for _, spec in spec_fields(config) if hasattr(spec, "choice")
             for p in spec.params() if p.flag != spec.choice.flag}
    return [(item, owner.get(option_name(item))) for item in layout(config)]


def _inherited(rung) -> set[tuple[str, tuple, str]]:
    """(option, its TRL names, a TRL class) of the rungs whose Config the rung's extends (the agent's: grpo's), for
    each class such a rung maps: their rows (a class the parent does not map is the rung's own to map)."""
    parents = [m for m in registry.rungs().values() if m.Config is not rung.Config
               and issubclass(rung.Config, m.Config)]
    return {(option_name(item), trl_names(item), cls) for parent in parents for item in layout(parent.Config)
            for cls in parent.RUNG.trl_classes}


def rung_rows(rung) -> tuple[Mapping, ...]:
    """The rows of one rung: its options' TRL names in the classes it maps (an option it inherits from another rung's
    Config, with the same names, is that rung's row in the classes that rung maps), then the settings it has no flag
    for; those a ``ladder.core`` function computes first, each group in the options' order."""
    classes, inherited, out = rung.RUNG.trl_classes, _inherited(rung), []
    for item, union in _options(rung.Config):
        option, names = option_name(item), trl_names(item)
        condition = None if union is None else _read_by_run(union, option)
        out += [_row(d, cls, rung, option, condition) for d in names for cls in d.classes()
                if cls in classes and (option, names, cls) not in inherited]
    out += [_row(d, cls, rung, None, None) for d in rung.RUNG.trl for cls in d.classes()]
    return tuple(sorted(out, key=lambda row: row.core_function is None))  # the math first, then the bookkeeping


def all_rows() -> tuple[Mapping, ...]:
    """Every rung's rows, in the rungs' order, each rung's in its options' (``--help``'s); made when asked, so an
    objective registered since (``loss_types``) has its rows."""
    return tuple(row for rung in registry.rungs().values() for row in rung_rows(rung))


def __getattr__(name: str):
    if name == "ROWS":  # read when asked: an objective registered after this module loaded has its rows in it
        return all_rows()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- lookups ---------------------------------------------------------------------------------------

def rows(trl_class: str) -> tuple[Mapping, ...]:
    """The rows of one TRL class (``"GRPOConfig"``, ``"RLOOConfig"``, ``"PPOConfig"``, ``"GRPOTrainer"``, …)."""
    return tuple(r for r in all_rows() if r.trl_class == trl_class)


def trl_classes() -> tuple[str, ...]:
    return tuple(dict.fromkeys(r.trl_class for r in all_rows()))


def for_field(trl_class: str, trl_field: str) -> tuple[Mapping, ...]:
    """The rows of one TRL name (several when it maps several ladder options, or depends on one)."""
    return tuple(r for r in all_rows() if r.trl_class == trl_class and r.trl_field == trl_field)


def for_option(option: str, rung: str = "grpo") -> tuple[Mapping, ...]:
    """The rows of one ladder option of ``rung``."""
    return tuple(r for r in all_rows() if r.ladder_rung == rung and r.ladder_option == option)


def ladder_options(rung: str) -> set[str]:
    """Every ladder option the map mentions for ``rung``."""
    return {r.ladder_option for r in all_rows() if r.ladder_rung == rung and r.ladder_option is not None}


def not_in_trl(rung: str = "grpo") -> tuple[Mapping, ...]:
    """The rows of ladder options with no TRL equivalent."""
    return tuple(r for r in all_rows() if r.ladder_rung == rung and r.trl_field is None)


def trl_values(cfg, trl_class: str = "GRPOConfig") -> dict[str, tuple[Any, Mapping]]:
    """TRL field → (its value for the ladder ``cfg``, the row that gave it), from the rows that carry a value
    and apply to ``cfg``. Two applying rows for one field are a bug in the map."""
    values: dict[str, tuple[Any, Mapping]] = {}
    for row in rows(trl_class):
        if row.value is None or row.trl_field is None or not row.applies_to(cfg):
            continue
        if row.trl_field in values:
            raise ValueError(f"{trl_class}.{row.trl_field} is given by two rows: "
                             f"{values[row.trl_field][1].ladder_option} and {row.ladder_option}")
        values[row.trl_field] = (row.value(cfg), row)
    return values
