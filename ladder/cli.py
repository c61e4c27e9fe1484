"""The command line of every rung: one ``--flag`` per option (``add_config_args``, in ``ladder.options.layout``'s
order), its config built from the parsed flags over a preset (``config_from_args``), a bad option one line on stderr
with exit code 2 (``OneLineParser``, ``die``) and each default said once in ``--help`` (``HelpFormatter``).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import typing

from ladder.domains import Flag, OneOf
from ladder.options import base_type, layout

_NEGATIVE_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|-inf|-nan")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad option is one line on stderr and exit code 2, and ``--lr -1e-3`` is a number."""

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        joined = []
        for arg in args:  # argparse reads "-1e-3" as an option; "--lr=-1e-3" is unambiguous
            if joined and _NEGATIVE_NUMBER.fullmatch(arg) and joined[-1].startswith("--") and "=" not in joined[-1]:
                joined[-1] = f"{joined[-1]}={arg}"
            else:
                joined.append(arg)
        return super().parse_known_args(joined, namespace)

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


_SAYS_ITS_DEFAULT = re.compile(r"%\(default\)|\bdefault[:\s]")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` of every rung: the rung's docstring as written, and each option's default said once.

    argparse's ``(default: X)`` is added where the help text does not already say what the default is
    (``"(default: on with --qlora)"``, ``"default on with --kl-in loss"``), and never as ``(default: None)``
    or on a switch that is off unless given: there the help says what leaving the option out does.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        switch = action.nargs == 0 and not isinstance(action, argparse.BooleanOptionalAction)
        if action.default in (None, argparse.SUPPRESS) or switch or _SAYS_ITS_DEFAULT.search(help_text):
            return help_text
        return help_text + " (default: %(default)s)"


def add_config_args(parser: argparse.ArgumentParser, config_cls, suppress_defaults: bool = False) -> None:
    """One ``--flag`` per option (``layout``). With ``suppress_defaults`` only the flags actually given are parsed."""
    for f in layout(config_cls):
        if not isinstance(f, dataclasses.Field):  # a spec's param
            _add_param_args(parser, [f], suppress_defaults)
            continue
        flags = ["--" + f.name.replace("_", "-"), *f.metadata.get("aliases", ())]
        kind = base_type(f.type)
        help_text = f.metadata.get("help", "")
        help_text = help_text() if callable(help_text) else help_text  # a help built from a registry, as it is now
        if f.metadata.get("aliases"):
            help_text += f" (formerly {', '.join(f.metadata['aliases'])})"
        default = argparse.SUPPRESS if suppress_defaults else f.default
        if kind is bool:
            parser.add_argument(*flags, dest=f.name, action=argparse.BooleanOptionalAction, default=default,
                                help=help_text)
        else:
            choices = f.metadata.get("choices")
            parser.add_argument(*flags, dest=f.name, type=kind, default=default, help=help_text,
                                choices=None if choices is None else tuple(choices), metavar=f.name.upper())
        for switch, value in f.metadata.get("switches", {}).items():
            parser.add_argument(switch, dest=f.name, action="store_const", const=value, default=default,
                                help=f"the same as {flags[0]} {value}")


def _add_param_args(parser: argparse.ArgumentParser, params, suppress_defaults: bool) -> None:
    """A spec's flags: one per param, its default the spec field's."""
    for p in params:
        default = argparse.SUPPRESS if suppress_defaults else p.default
        help_text = p.help() if callable(p.help) else p.help  # a help built from a registry, as it is now
        aliases = tuple(getattr(p, "aliases", ()))
        if aliases:
            help_text += f" (formerly {', '.join(aliases)})"
        if isinstance(p.domain, Flag):  # an on/off flag (a choice: --adaptive-entropy)
            parser.add_argument(p.dashed, *aliases, dest=p.flag, action=argparse.BooleanOptionalAction,
                                default=default, help=help_text)
            continue
        kind = getattr(p.domain, "kind", None) or (str if p.default is None else type(p.default))
        checked = isinstance(p.domain, OneOf) and getattr(p, "parser_checks", True)
        choices = tuple(p.domain.choices) if checked else None
        parser.add_argument(p.dashed, *aliases, dest=p.flag, type=kind, default=default, help=help_text,
                            choices=choices, metavar=p.flag.upper())


def config_from_args(config_cls, args: argparse.Namespace, overrides: dict | None = None,
                     given: set[str] = frozenset()):
    """Build the dataclass from parsed args; ``overrides`` (a preset) apply to the options not ``given``.
    A spec field is built from its params' flags, after the other options (it may depend on them)."""
    overrides = overrides or {}

    def value_of(name: str, default=None):
        if name in overrides and name not in given:
            return overrides[name]
        return getattr(args, name, default)

    values = {f.name: value_of(f.name) for f in dataclasses.fields(config_cls) if not f.metadata.get("spec")}
    for f in dataclasses.fields(config_cls):
        if f.metadata.get("spec"):
            spec = f.metadata["spec"]
            values[f.name] = spec.build(values, {p.flag: value_of(p.flag, p.default) for p in spec.params()})
    return config_cls(**values)


def die(message: str) -> typing.NoReturn:
    print(f"ladder: error: {message}", file=sys.stderr)
    raise SystemExit(2)
