"""Options from dataclasses: every hyperparameter is a ``--flag`` with its default in ``--help``."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import types
import typing
from dataclasses import dataclass, field


def option(default, help: str, choices: tuple | None = None):
    """A config field with its ``--help`` text (and allowed values)."""
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass
class RunOptions:
    """Options every rung shares."""

    out: str | None = option(None, "output directory (default: runs/RUNG-seedN)")
    seed: int = option(0, "random seed (torch, numpy, python, environments)")
    device: str = option("cpu", "torch device, e.g. cpu, cuda, cuda:1")
    tensorboard: bool = option(False, "also write TensorBoard logs to OUT/tb")
    resume: str | None = option(None, "continue the run saved in this directory")
    overwrite: bool = option(False, "replace an existing --out directory")
    checkpoint_every: int = option(10, "save a resumable checkpoint every N updates")
    progress: bool = option(True, "show a progress bar")
    max_nonfinite_updates: int = option(10, "stop after this many updates in a row whose every step had a "
                                            "non-finite loss or gradient (0: never)")
    use_exercises: bool = option(False, "train with your implemented functions from exercises/ "
                                        "(or $LADDER_EXERCISES) in place of the core's")


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


def _base_type(tp):
    if isinstance(tp, str):
        tp = eval(tp, vars(typing) | {"types": types})  # noqa: S307 - annotations of our own dataclasses
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if args else tp


def add_config_args(parser: argparse.ArgumentParser, config_cls, suppress_defaults: bool = False) -> None:
    """One ``--flag`` per field. With ``suppress_defaults`` only the flags actually given are parsed."""
    for f in dataclasses.fields(config_cls):
        flag = "--" + f.name.replace("_", "-")
        kind = _base_type(f.type)
        help_text = f.metadata.get("help", "")
        default = argparse.SUPPRESS if suppress_defaults else f.default
        if kind is bool:
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default,
                                help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, type=kind, default=default, help=help_text,
                                choices=f.metadata.get("choices"), metavar=f.name.upper())


def config_from_args(config_cls, args: argparse.Namespace, overrides: dict | None = None,
                     given: set[str] = frozenset()):
    """Build the dataclass from parsed args; ``overrides`` (a preset) apply to the options not ``given``."""
    values = {}
    for f in dataclasses.fields(config_cls):
        value = getattr(args, f.name)
        if overrides and f.name in overrides and f.name not in given:
            value = overrides[f.name]
        values[f.name] = value
    return config_cls(**values)


def show_progress(wanted: bool) -> bool:
    """Progress bars on a terminal or in a notebook; not in pipes and log files, where they are noise."""
    return wanted and (sys.stderr.isatty() or "ipykernel" in sys.modules)


def die(message: str) -> typing.NoReturn:
    print(f"ladder: error: {message}", file=sys.stderr)
    raise SystemExit(2)
