"""Typed specs behind flat flags: a config field that holds a spec (a small frozen dataclass owned by the code it
configures) whose fields are set from the command line by flags of their own.

A spec field is declared with ``option(default, help, spec=SPEC_OPTION)``, where SPEC_OPTION says:

    params()               the flags (``Param``: flag name, the spec's field it sets, help, domain; the default is
                           the spec field's own), in the order ``--help`` lists them
    build(values, flags)   the spec from the other options' values and every param flag's value (its default when
                           not given); refuses, in one line, a flag the chosen spec does not read
    flat(config)           flag → value of the spec the config holds (config.json, --print-config, the TRL map)
    problem(config)        what is wrong with the spec the config holds, in one line (None: nothing)

``options_dict`` and ``option_value`` read a config as its flags: the spec fields flattened.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ladder.cli import outside_domain
from ladder.runtime.errors import OptionError, UsageError

_FIELDS_OWN = object()  # a Param's default: its spec field's own


@dataclass(frozen=True)
class Param:
    """``--{flag}`` sets the field ``name`` of the spec class ``spec``; its default is that field's, unless a rung
    gives it its own (``own_default``: the agent's ``--reward-funcs``)."""

    flag: str
    spec: type
    name: str
    help: str
    domain: Any = None
    own_default: Any = _FIELDS_OWN

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
    """Every option of a config as its flags name it: the plain fields, and each spec field's param flags."""
    names = []
    for f in dataclasses.fields(config_cls):
        spec = f.metadata.get("spec")
        names += [p.flag for p in spec.params()] if spec else [f.name]
    return names


def options_dict(config) -> dict:
    """The config as flag → value (``dataclasses.asdict`` with each spec field flattened into its flags)."""
    values = {}
    for f in dataclasses.fields(config):
        spec = f.metadata.get("spec")
        if spec:
            values.update(spec.flat(config))
        else:
            values[f.name] = copy.deepcopy(getattr(config, f.name))
    return values


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


def option_defaults(config_cls) -> dict:
    """flag → default of every option (a param's default is its spec field's)."""
    defaults = {}
    for f in dataclasses.fields(config_cls):
        spec = f.metadata.get("spec")
        if spec:
            defaults.update({p.flag: p.default for p in spec.params()})
        else:
            defaults[f.name] = f.default
    return defaults


class ChosenSpec:
    """A spec field whose class another option's value picks (``--loss-type sapo``: ``core.SoftGate``;
    ``--adaptive-entropy``: an ``AdaptiveEntropy``, none without it). Its flags are every pickable class's params;
    the field holds None while they are all at their defaults (``resolve`` then gives the picked class's defaults).

    ``field``: the config field that holds the spec; ``choice``: the option that picks it; ``pick(value)``: the class
    (None: none); ``params()``: class → its params; ``refusal(cls, flags, value)``: the line that refuses flags of a
    class the run did not pick (``needs(cls)`` names what picks it, for the default line). A held spec's
    ``conflict()``, if it has one, is its own rule between its fields."""

    def __init__(self, field: str, choice: str, pick: Callable[[Any], type | None],
                 params: Callable[[], dict[type, tuple[Param, ...]]], needs: Callable[[type], str],
                 refusals: Callable[[], dict[type, str]] = dict):
        self.field, self.choice, self.pick, self.by_class = field, choice, pick, params
        self.needs, self.refusals = needs, refusals

    def params(self) -> list[Param]:
        return [p for params in self.by_class().values() for p in params]

    def resolve(self, config):
        """The spec this config holds, or the picked class at its defaults (None: no class picked)."""
        held = getattr(config, self.field)
        if held is not None:
            return held
        cls = self.pick(getattr(config, self.choice))
        return None if cls is None else cls()

    def build(self, values: dict, flags: dict):
        """The picked class's spec from its flags (None: all at their defaults); every flag's value checked against
        its domain first, then a flag only another class reads, set to other than its default, refused."""
        for p in self.params():
            problem = p.problem(flags[p.flag])
            if problem is not None:
                raise OptionError(problem)
        chosen = self.pick(values.get(self.choice))
        for cls, params in self.by_class().items():
            given = [p.dashed for p in params if cls is not chosen and flags[p.flag] != p.default]
            if given:
                raise UsageError(self.refusal(cls, given, values.get(self.choice)))
        if chosen is None:
            return None
        built = chosen(**{p.name: flags[p.flag] for p in self.by_class().get(chosen, ())})
        return None if built == chosen() else built

    def refusal(self, cls: type, flags: list[str], value) -> str:
        refusals = self.refusals()
        if cls in refusals:  # a line with {flags} and {value}, or a function of them
            line = refusals[cls]
            return line(", ".join(flags), value) if callable(line) else line.format(flags=", ".join(flags), value=value)
        return f"{', '.join(flags)} {'has' if len(flags) == 1 else 'have'} no effect without {self.needs(cls)}"

    def flat(self, config) -> dict:
        spec = self.resolve(config)
        return {} if spec is None else {p.flag: getattr(spec, p.name) for p in self.by_class().get(type(spec), ())}

    def problem(self, config) -> str | None:
        held = getattr(config, self.field)
        if held is None:
            return None
        wanted = self.pick(getattr(config, self.choice))
        if type(held) is not wanted:
            dashed = "--" + self.choice.replace("_", "-")
            return f"{self.field} {held!r} is not what {dashed} {getattr(config, self.choice)!r} picks: {wanted}"
        found = next(filter(None, (p.problem(getattr(held, p.name)) for p in self.by_class()[wanted])), None)
        return found if found is not None else _conflict(held)


def switched(field: str, switch: str, spec: type, params: tuple[Param, ...]) -> ChosenSpec:
    """A ``ChosenSpec`` that an option turns on: ``spec`` while ``switch`` is truthy (on, or a positive number),
    none otherwise, when its params are refused ("no effect without --SWITCH")."""
    dashed = "--" + switch.replace("_", "-")
    return ChosenSpec(field, switch, lambda on: spec if on else None, lambda: {spec: params}, lambda cls: dashed)


def _conflict(spec) -> str | None:
    """The spec's own rule between its fields (its ``conflict()`` method, if it has one): a line, or None."""
    rule = getattr(spec, "conflict", None)
    return None if rule is None else rule()


class FixedSpec:
    """A spec field of one class, always held (its default an instance): every param is read, none refused; the
    spec's ``conflict()``, if it has one, is its own rule between its fields."""

    def __init__(self, field: str, cls: type, params: tuple[Param, ...]):
        self.field, self.cls, self._params = field, cls, tuple(params)

    def params(self) -> list[Param]:
        return list(self._params)

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
        flags = {name: kwargs.pop(name) for name in list(kwargs) if name in _param_flags(config_cls)}
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


def _param_flags(config_cls) -> set[str]:
    return {p.flag for _, spec in spec_fields(config_cls) for p in spec.params()}
