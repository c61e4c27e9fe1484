"""Typed specs behind flat flags: a config field that holds a spec (a small frozen dataclass owned by the code it
configures) whose fields are set from the command line by flags of their own.

A spec field is declared with ``option(default, help, spec=SPEC_OPTION)``, where SPEC_OPTION says:

    params()               the flags (``Param``: flag name, the spec's field it sets, help, domain; the default is
                           the spec field's own), in the order ``--help`` lists them
    build(values, flags)   the spec from the other options' values and every param flag's value (its default when
                           not given); refuses, in one line, a flag the chosen spec does not read
    flat(config)           flag → value of the spec the config holds (config.json, --print-config, the TRL map)
    problem(config)        what is wrong with the spec the config holds, in one line (None: nothing)
    placed()               (optional) flag → the option it is listed before, where not in the field's place

A choice between specs is one field too (``UnionSpec``, a tagged union): the class it holds is the choice, and the
choice's flag (``--loss-type``, ``--adaptive-entropy``) is read off it — no field of its own beside the spec's.

``options_dict`` (``ladder.options``') and ``option_value`` read a config as its flags: the spec fields flattened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ladder.domains import Flag, outside_domain
from ladder.options import layout, option_name
from ladder.options import options_dict as options_dict  # (re-exported: its readers import it from here)
from ladder.runtime.errors import OptionError, UsageError

_FIELDS_OWN = object()  # a Param's default: its spec field's own


@dataclass(frozen=True)
class Param:
    """``--{flag}`` sets the field ``name`` of the spec class ``spec``; its default is that field's, unless a rung
    gives it its own (``own_default``: the agent's ``--reward-funcs``)."""

    flag: str
    spec: type | None     # None: a choice's flag (``choice_param``), which sets no field
    name: str
    help: str | Callable[[], str]
    domain: Any = None
    own_default: Any = _FIELDS_OWN
    aliases: tuple = ()          # former flag names still accepted (``("--sample-every",)``)
    parser_checks: bool = True   # False: a ``OneOf`` domain checked as the other options are, not by argparse
    trl: tuple | Callable[[], tuple] = ()  # its names in TRL (``ladder.trl_rows.TRL``; a function: read when asked)

    @property
    def default(self):
        if self.own_default is not _FIELDS_OWN:
            return self.own_default
        return {f.name: f.default for f in dataclasses.fields(self.spec)}[self.name]

    @property
    def dashed(self) -> str:
        return "--" + self.flag.replace("_", "-")

    def problem(self, value) -> str | None:
        """The domain's complaint about ``value``, as the option's one line (None: in the domain)."""
        return outside_domain(self.dashed, self.domain, value, self.default)


class SpecOption(Protocol):
    def params(self) -> Iterable[Param]: ...

    def build(self, values: dict, flags: dict) -> Any: ...

    def flat(self, config) -> dict: ...

    def problem(self, config) -> str | None: ...


def spec_fields(config_or_cls) -> list[tuple[dataclasses.Field, SpecOption]]:
    """The fields of a config that hold a spec, with their ``SpecOption``."""
    return [(f, f.metadata["spec"]) for f in dataclasses.fields(config_or_cls) if f.metadata.get("spec")]


def option_names(config_cls) -> list[str]:
    """Every option of a config as its flags name it: the plain fields, and each spec field's param flags (in
    ``ladder.options.layout``'s order)."""
    return [option_name(item) for item in layout(config_cls)]


def option_value(config, flag: str):
    """One option's value by its flag's name: a plain field, or a param of the spec the config holds (a param of a
    spec it does not hold: that param's default)."""
    if flag in {f.name for f in dataclasses.fields(config) if not f.metadata.get("spec")}:
        return getattr(config, flag)
    for _, spec in spec_fields(config):
        flat = spec.flat(config)
        if flag in flat:
            return flat[flag]
        for p in spec.params():
            if p.flag == flag:
                return p.default
    raise AttributeError(f"{type(config).__name__} has no option {flag!r}")


def trl_names(item) -> tuple:
    """The TRL names an option declares (``ladder.trl_rows.TRL``): a ``layout`` item's, a field's or a param's."""
    trl = item.metadata.get("trl", ()) if isinstance(item, dataclasses.Field) else item.trl
    return tuple(trl() if callable(trl) else trl)


def option_defaults(config_cls) -> dict:
    """flag → default of every option (a param's default is its spec field's), in ``ladder.options.layout``'s order."""
    return {option_name(item): item.default for item in layout(config_cls)}


class UnionSpec:
    """A spec field that holds one of several classes, a tagged union: the class held is the choice, and a flag of its
    own says which (``--loss-type sapo``: a ``loss_types.Sapo``; ``--adaptive-entropy``: an ``AdaptiveEntropy``, None
    without it; ``--ref-sync-every 5``: ``ReferenceRefresh(every=5, …)``, None at 0). No other field says it.

    ``choice``: that flag (a ``Param``, ``choice_param``); ``pick(value)``: the class its value holds (None: none);
    ``tag(spec)``: the choice's value of a held spec (or of None). ``groups()``: group → the params its classes read,
    read when asked (a class registered later is a choice too); classes that read the same params share a group
    (``group_of(cls)``: the clipped loss types' ``--delta``), and a group's params may include the choice itself.
    ``refusals()``: group → the line that refuses its params when the run picked another (``{flags}``, ``{value}``, or
    a function of them; default: "... has no effect without ``needs(group)``"). ``before``: the option the choice's
    flag is listed before (``placed``; None: first of the spec's flags). A held spec's ``conflict()``, if it has one,
    is its own rule between its fields."""

    def __init__(self, field: str, choice: Param, pick: Callable[[Any], type | None], tag: Callable[[Any], Any],
                 groups: Callable[[], dict[Any, tuple[Param, ...]]], needs: Callable[[Any], str],
                 group_of: Callable[[type], Any] = lambda cls: cls, refusals: Callable[[], dict] = dict,
                 before: str | None = None):
        self.field, self.choice, self.pick, self.tag, self.groups = field, choice, pick, tag, groups
        self.needs, self.group_of, self.refusals, self.before = needs, group_of, refusals, before

    def placed(self) -> dict[str, str]:
        """Flag → the option it is listed before, where not among the spec's own (``ladder.options.layout``)."""
        return {} if self.before is None else {self.choice.flag: self.before}

    def params(self) -> list[Param]:
        """The choice's flag, then every group's params (each once)."""
        out = {self.choice.flag: self.choice}
        for params in self.groups().values():
            out.update({p.flag: p for p in params if p.flag not in out})
        return list(out.values())

    def resolve(self, config):
        """The spec this config holds (None: none)."""
        return getattr(config, self.field)

    def _read(self, cls: type | None) -> tuple[Param, ...]:
        return () if cls is None else self.groups().get(self.group_of(cls), ())

    def build(self, values: dict, flags: dict):
        """The picked class's spec from its flags; every flag's value checked against its domain first, then a flag
        that only another class reads, set to other than its default, refused."""
        for p in self.params():
            problem = p.problem(flags[p.flag])
            if problem is not None:
                raise OptionError(problem)
        value = flags[self.choice.flag]
        chosen = self.pick(value)
        mine = None if chosen is None else self.group_of(chosen)
        for group, params in self.groups().items():
            given = [p.dashed for p in params
                     if group != mine and p.flag != self.choice.flag and flags[p.flag] != p.default]
            if given:
                raise UsageError(self.refusal(group, given, value))
        return None if chosen is None else chosen(**{p.name: flags[p.flag] for p in self._read(chosen)})

    def refusal(self, group, flags: list[str], value) -> str:
        refusals = self.refusals()
        if group in refusals:
            line = refusals[group]
            return line(", ".join(flags), value) if callable(line) else line.format(flags=", ".join(flags), value=value)
        return f"{', '.join(flags)} {'has' if len(flags) == 1 else 'have'} no effect without {self.needs(group)}"

    def flat(self, config) -> dict:
        """The choice's flag and the params of the class held."""
        held = getattr(config, self.field)
        read = () if held is None else self._read(type(held))
        return {self.choice.flag: self.tag(held), **{p.flag: getattr(held, p.name) for p in read}}

    def problem(self, config) -> str | None:
        held = getattr(config, self.field)
        if held is None and self.pick(self.tag(None)) is None:  # none held: a choice only where the flag says so
            return self.choice.problem(self.tag(None))
        if type(held) is not self.pick(self.tag(held)):
            return f"{self.field} must hold what a {self.choice.dashed} picks, got {held!r}"
        found = next(filter(None, (p.problem(getattr(held, p.name)) for p in self._read(type(held)))), None)
        return found if found is not None else _conflict(held)


def choice_param(flag: str, help: str | Callable[[], str], domain, default,
                 trl: tuple | Callable[[], tuple] = ()) -> Param:
    """The flag of a ``UnionSpec``'s choice: it sets no field, its value is the class held (``help``: a text, or a
    function of none that makes it when ``--help`` is built, from a registry as it is then; ``trl``: its TRL names)."""
    return Param(flag, None, flag, help, domain, own_default=default, trl=trl)


def switched(field: str, flag: str, help: str, spec: type, params: tuple[Param, ...], trl: tuple = ()) -> UnionSpec:
    """A ``UnionSpec`` that an on/off flag picks: ``spec`` with ``--FLAG``, None without it (its params then
    refused: "no effect without --FLAG"); ``trl``: the flag's TRL names."""
    choice = choice_param(flag, help, Flag(), False, trl)
    return UnionSpec(field, choice, lambda on: spec if on else None, lambda held: held is not None,
                     lambda: {spec: params}, lambda group: choice.dashed)


def _conflict(spec) -> str | None:
    """The spec's own rule between its fields (its ``conflict()`` method, if it has one): a line, or None."""
    rule = getattr(spec, "conflict", None)
    return None if rule is None else rule()


class FixedSpec:
    """A spec field of one class, always held (its default an instance): every param is read, none refused; the
    spec's ``conflict()``, if it has one, is its own rule between its fields."""

    def __init__(self, field: str, cls: type, params: tuple[Param, ...], placed: dict[str, str] | None = None):
        self.field, self.cls, self._params, self._placed = field, cls, tuple(params), dict(placed or {})

    def params(self) -> list[Param]:
        return list(self._params)

    def with_defaults(self, **defaults) -> FixedSpec:
        """The same spec with a rung's own defaults for some of its flags (``OPTION.with_defaults(kl_coef=0.0)``; the
        rung's field then holds the spec with those values)."""
        params = tuple(dataclasses.replace(p, own_default=defaults[p.flag]) if p.flag in defaults else p
                       for p in self._params)
        return FixedSpec(self.field, self.cls, params, self._placed)

    def placed(self) -> dict[str, str]:
        """Flag → the option it is listed before, where not in the field's place (``ladder.options.layout``)."""
        return dict(self._placed)

    def resolve(self, config):
        return getattr(config, self.field)

    def build(self, values: dict, flags: dict):
        for p in self._params:
            problem = p.problem(flags[p.flag])
            if problem is not None:
                raise OptionError(problem)
        return self.cls(**{p.name: flags[p.flag] for p in self._params})

    def flat(self, config) -> dict:
        spec = getattr(config, self.field)
        return {p.flag: getattr(spec, p.name) for p in self._params}

    def problem(self, config) -> str | None:
        spec = getattr(config, self.field)
        if type(spec) is not self.cls:
            return f"{self.field} must be a {self.cls.__qualname__}, got {spec!r}"
        found = next(filter(None, (p.problem(getattr(spec, p.name)) for p in self._params)), None)
        return found if found is not None else _conflict(spec)


def accepts_flags(config_cls):
    """Let a config's constructor, and so ``dataclasses.replace``, take a spec's params by their flags' names
    (``Config(kl_coef=0.0, loss_type="sapo", sapo_temperature_pos=2.0)``): each spec is built from its flags over the
    spec given (or the field's default), as the command line builds it. A class decorator, after ``@dataclass``."""
    init = config_cls.__init__

    def __init__(self, *args, **kwargs):
        flags = {name: kwargs.pop(name) for name in list(kwargs) if _is_flag(config_cls, name, kwargs[name])}
        if flags:
            plain = {f.name: f.default for f in dataclasses.fields(config_cls) if not f.metadata.get("spec")}
            for f, spec in spec_fields(config_cls):
                mine = {p.flag for p in spec.params()} & set(flags)
                if mine:
                    held = type("Held", (), {**plain, **kwargs, f.name: kwargs.get(f.name, f.default)})
                    base = {p.flag: p.default for p in spec.params()} | spec.flat(held)
                    kwargs[f.name] = spec.build({**plain, **kwargs}, base | {k: flags[k] for k in mine})
        init(self, *args, **kwargs)

    __init__.__doc__ = init.__doc__
    config_cls.__init__ = __init__
    return config_cls


def _is_flag(config_cls, name: str, value) -> bool:
    """Whether ``name=value`` sets a spec's param by its flag. A name that is a field's too (``dynamic_sampling``: the
    field holds the spec, its choice's flag says on or off) is the flag for a value of the flag's domain."""
    params = {p.flag: p for _, spec in spec_fields(config_cls) for p in spec.params()}
    if name not in params:
        return False
    return name not in {f.name for f in dataclasses.fields(config_cls)} or params[name].problem(value) is None
