"""Options from dataclasses: every hyperparameter is a ``--flag`` with its default, help and domain.

An option declares, once, what values it accepts (``option(default, help, domain)``): an integer
with bounds, a number in an interval (finite unless it says otherwise), a probability, one of some
choices, text, a path of a given kind, or a torch device this machine has. Every config checks its
fields on construction — from the command line (one line, exit code 2) and from Python
(``ValueError`` naming the field and its domain) alike; a rung's ``validate()`` keeps only the
rules that relate several options.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from ladder.runtime.errors import OptionError
from ladder.runtime.trackers import REPORT_TO
from ladder.trl_rows import DPO, GRPO, PPO, REWARD, RLOO, SAME, TRL, const, on_cuda, optimizer_steps, trl_output_dir

# The GRPOConfig fields of where and how a run runs (--device)
DEVICE_TRL = (
    TRL("use_cpu", note="the script's --device overrides it", value=lambda cfg: cfg.device == "cpu"),
    TRL("bf16", note="ladder computes in bfloat16 on a CUDA GPU that has it, float32 on the CPU (TRL's default: bf16 "
        "on)", value=on_cuda),
    TRL("model_init_kwargs", note="the dtype the model loads in",
        value=lambda cfg: {"dtype": "bfloat16" if on_cuda(cfg) else "float32"}),
)


@dataclass(frozen=True)
class Number:
    """An int or a float in [low, high] (either end open or absent); finite unless ``finite=False``.

    ``limit``: ``high`` only keeps absurd values out (2**63, 1e300: they overflow, hang or allocate what no machine
    has) and is no part of what the option means, so a value outside is told the one bound it crossed
    (``--lr must be positive``, ``--lr must be ≤ 1``), as an integer in a closed range always is.
    """

    kind: type = float
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    finite: bool = True
    limit: bool = False

    def _shown(self, x: float) -> str:
        return str(int(x)) if self.kind is int else f"{x:g}"

    def words(self) -> str:
        lo = None if self.low is None else self._shown(self.low)
        hi = None if self.high is None else self._shown(self.high)
        if lo is not None and hi is not None:
            return f"in {'(' if self.open_low else '['}{lo}, {hi}{')' if self.open_high else ']'}"
        if lo is not None:
            if self.low == 0 and self.open_low:
                return "positive"
            if self.kind is int and not self.open_low:
                return f"at least {lo}"
            return f"{'>' if self.open_low else '≥'} {lo}"
        if hi is not None:
            return f"{'<' if self.open_high else '≤'} {hi}"
        return "a finite number" if self.finite else "a number"

    def problem(self, value) -> str | None:
        kinds = (int,) if self.kind is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return "an integer" if self.kind is int else "a number"
        one_sided = self.limit or (self.kind is int and not (self.open_low or self.open_high))
        if self.kind is float and math.isnan(value):
            if self.low is None and self.high is None:
                return "a number"
            return self._side(below=self.low is not None) if one_sided else self.words()
        if self.finite and not math.isfinite(value):
            return "a finite number"
        below = self.low is not None and (value <= self.low if self.open_low else value < self.low)
        above = self.high is not None and (value >= self.high if self.open_high else value > self.high)
        if (below or above) and one_sided:
            return self._side(below)
        return self.words() if below or above else None

    def _side(self, below: bool) -> str:
        """The words of the one bound a value crossed: ``at least 1``, ``positive``, ``≥ 0.01``; ``at most 1000``."""
        if below:
            return dataclasses.replace(self, high=None).words()
        if self.kind is int and not self.open_high:
            return f"at most {self._shown(self.high)}"
        return f"{'<' if self.open_high else '≤'} {self._shown(self.high)}"


@dataclass(frozen=True)
class OneOf:
    choices: tuple

    def words(self) -> str:
        return "one of " + ", ".join(map(str, self.choices))

    def problem(self, value) -> str | None:
        return None if value in self.choices else self.words()


@dataclass(frozen=True)
class Text:
    """A non-empty string (a hub id, a file, a comma-separated list: the rung reads it further)."""

    def words(self) -> str:
        return "a non-empty text"

    def problem(self, value) -> str | None:
        return None if isinstance(value, str) and value.strip() else self.words()


@dataclass(frozen=True)
class Flag:
    def words(self) -> str:
        return "on or off (--flag / --no-flag)"

    def problem(self, value) -> str | None:
        return None if isinstance(value, bool) else self.words()


@dataclass(frozen=True)
class PathKind:
    """``dir``: a directory to create or reuse; ``run``: a run directory (resume); ``existing_dir``."""

    kind: str

    def words(self) -> str:
        return {"dir": "a directory to create or reuse (not a file)", "run": "a run directory (with config.json)",
                "existing_dir": "an existing directory"}[self.kind]

    def problem(self, value) -> str | None:
        if not isinstance(value, str) or not value.strip():
            return self.words()
        path = Path(value)
        if self.kind == "dir":
            blocked = [q for q in (path, *path.parents) if q.exists() and not q.is_dir()]
            return None if not blocked else self.words()
        if self.kind == "run":
            return None if (path / "config.json").is_file() else self.words()
        return None if path.is_dir() else self.words()


@dataclass(frozen=True)
class Device:
    """A torch device this torch build and this machine really have."""

    def words(self) -> str:
        import torch

        here = ", ".join(available_devices()) + ("" if torch.cuda.is_available() else "; no CUDA GPU here")
        return f"a torch device that exists here ({here})"

    def problem(self, value) -> str | None:
        import torch

        try:
            dev = torch.device(value)
        except (RuntimeError, TypeError):
            return self.words()
        if dev.type == "cpu":
            return None
        if dev.type == "cuda" and torch.cuda.is_available() and (dev.index or 0) < torch.cuda.device_count():
            return None
        if dev.type == "mps" and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return None
        return self.words()


def available_devices() -> list[str]:
    import torch

    devices = ["cpu"] + (["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
                         if torch.cuda.is_available() else [])
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        devices.append("mps")
    return devices


# The upper limits of the rungs' numbers: generous for any real run, small enough that a value past them (2**63 or
# 1e300: a slip of the keyboard or a script's arithmetic) is refused in one line when the options are read, not met
# later as an overflow, a loop that never ends or an allocation no machine has.
MAX_STEPS = 10**9            # updates or environment steps, and every interval counted in them (every N, warm-up;
                             # 10**9 also serves as "never", as the benchmarks' --checkpoint-every does)
MAX_EPISODES = 10**6         # episodes of one evaluation
MAX_TOKENS = 10**6           # tokens of a prompt or a completion, positions per chunk, top-k (beyond any vocabulary)
MAX_ROWS = 65536             # rows of one batch or forward: completions, pairs, prompts, minibatches
MAX_EXAMPLES = 10**8         # examples, problems or pairs taken from a dataset, completions sampled in a run
MAX_PASSES = 1000            # passes, rounds and tool calls that repeat within one update
MAX_LORA_ALPHA = 65536       # LoRA α: 16 × the largest rank (α / r scales the adapter's update)
MAX_LR = 1.0                 # a learning rate (Adam's step is about lr per weight: 1 already erases a model)
MAX_COEF = 1000.0            # a loss or reward coefficient (β, c_v, c_H, a penalty)
MAX_SCALE = 1e9              # a threshold or scale (a clip that never binds, a cap, a target KL, a gate's τ)


# Shorthands for the common domains.
def at_least(k: int) -> Number:
    """An integer of at least k, with no upper limit: a rung's option says its limit (``count``)."""
    return Number(int, low=k)


def int_range(low: int, high: int) -> Number:
    """An integer in [low, high]: the upper bound where a larger value would overflow or could never be allocated."""
    return Number(int, low=low, high=high)


def count(low: int, high: int) -> Number:
    """How many of something: an integer in [low, high], ``high`` one of the MAX_* limits above."""
    return int_range(low, high)


def positive(high: float | None = None) -> Number:
    """A float > 0; ``high``: its limit (a larger value is refused as ``≤ high``)."""
    return Number(float, low=0.0, open_low=True, high=high, limit=high is not None)


def non_negative(high: float | None = None) -> Number:
    """A float ≥ 0; ``high``: its limit (a larger value is refused as ``≤ high``)."""
    return Number(float, low=0.0, high=high, limit=high is not None)


def learning_rate() -> Number:
    """A learning rate in (0, MAX_LR]."""
    return positive(MAX_LR)


def coefficient() -> Number:
    """A coefficient in [0, MAX_COEF] (0: the term is off)."""
    return non_negative(MAX_COEF)


def interval(low: float, high: float, open_low: bool = False, open_high: bool = False) -> Number:
    return Number(float, low=low, high=high, open_low=open_low, open_high=open_high)


def probability() -> Number:
    return interval(0.0, 1.0)


def option(default, help: str, domain=None, choices: tuple | None = None, why: str = "", aliases: tuple = (),
           switches: dict | None = None, spec=None, trl: tuple = ()):
    """A config field with its ``--help`` text and its domain (``choices`` make a ``OneOf``; a dict's keys are
    read when the parser is built, so a name registered later is a choice too).

    ``why`` is added to the error message (``--mu must be at least 1 (why), got 0``).
    A field whose default is None also accepts None (the help says what None means).
    ``aliases``: former flag names still accepted (``("--num-updates",)``).
    ``switches``: former on/off flags that now set one value (``{"--tensorboard": "tensorboard"}``).
    ``spec``: the field holds a typed spec whose fields have flags of their own (``ladder.specs.SpecOption``).
    ``trl``: the option's names in TRL (``ladder.trl_rows.TRL``), from which ``ladder.trl.map`` is made.
    """
    if choices is not None:
        domain = OneOf(choices if isinstance(choices, dict) else tuple(choices))
    return field(default=default, metadata={"help": help, "choices": choices, "domain": domain, "why": why,
                                            "aliases": tuple(aliases), "switches": dict(switches or {}),
                                            "spec": spec, "trl": tuple(trl)})


def domain_of(f: dataclasses.Field):
    """The declared domain of a config field (a bool field is a ``Flag``; a spec field, its ``SpecOption``, whose
    params declare their own); None if it has none."""
    if f.metadata.get("spec"):
        return f.metadata["spec"]
    if _base_type(f.type) is bool:
        return Flag()
    return f.metadata.get("domain")


def check_options(config) -> None:
    """Raise ``OptionError`` for the first field whose value is outside its domain."""
    for f in dataclasses.fields(config):
        if f.metadata.get("spec"):
            problem = f.metadata["spec"].problem(config)
            if problem is not None:
                raise OptionError(problem)
            continue
        line = outside_domain("--" + f.name.replace("_", "-"), domain_of(f), getattr(config, f.name), f.default,
                              f.metadata.get("why", ""))
        if line is not None:
            raise OptionError(line)


def outside_domain(flag: str, domain, value, default, why: str = "") -> str | None:
    """The one line that refuses ``value`` for ``flag`` (None: in its domain, or None where the default is None)."""
    if domain is None or (value is None and default is None):
        return None
    wanted = domain.problem(value)
    if wanted is None:
        return None
    shown = repr(value) if isinstance(value, str) else value
    return f"{flag} must be {wanted}{f' ({why})' if why else ''}, got {shown}"


class Checked:
    """A config dataclass that checks every field's domain when it is built (and on ``replace``)."""

    def __post_init__(self):
        check_options(self)


@dataclass
class RunOptions(Checked):
    """Options every rung shares."""

    out: str | None = option(None, "output directory (default: "
                             "runs/RUNG[-PRESET][-ALGO][-lora|-qlora][-exercises]-seedN)", PathKind("dir"),
                             trl=(TRL("output_dir", note="OUT-trl (the adapter or model is saved there; the script's "
                                      "--output-dir overrides it)", value=trl_output_dir),))
    seed: int = option(0, "random seed (torch, numpy, python, environments; at most 2**32 − 1, numpy's "
                                 "largest)",
                       int_range(0, 2**32 - 1),
                       trl=(TRL("seed", value=SAME, cls=(GRPO, REWARD, DPO)), TRL("seed", cls=(RLOO, PPO))))
    device: str = option("cpu", "torch device, e.g. cpu, cuda, cuda:1", Device(), trl=DEVICE_TRL)
    report_to: str = option("none", "also send each update's numbers to a tracker: tensorboard (OUT/tb), "
                                    "trackio (local, project ladder) or wandb (OUT/wandb; WANDB_MODE=offline works "
                                    "without an account); trackio and wandb: pip install trackio wandb, or "
                                    "pip install -e \".[trackers]\" in ladder's checkout",
                            choices=REPORT_TO, switches={"--tensorboard": "tensorboard"},
                            trl=(TRL("report_to", note="the same trackers (TRL's TensorBoard logs go under "
                                     "output_dir)", value=lambda cfg: [cfg.report_to] if cfg.report_to != "none"
                                     else "none"),))
    resume: str | None = option(None, "continue the run saved in this directory", PathKind("run"),
                                trl=(TRL("resume_from_checkpoint", note="TRL resumes its own checkpoints "
                                         "(output_dir/checkpoint-N), not ladder's run directories",
                                         cls="GRPOTrainer.train"),))
    overwrite: bool = option(False, "replace the run of this rung in --out (only the files a run writes; a "
                                     "directory that is not a run's is refused)",
                             trl=(TRL(None, note="TRL writes into output_dir as it is"),))
    checkpoint_every: int = option(10, "save a resumable checkpoint every N updates", count(1, MAX_STEPS),
                                   trl=(TRL("save_steps", note="× μ × M optimiser steps",
                                            value=lambda cfg: optimizer_steps(cfg, cfg.checkpoint_every)),
                                        TRL("save_total_limit", note="ladder keeps only the latest checkpoint",
                                            value=const(1))))
    progress: bool = option(True, "show a progress bar",
                            trl=(TRL("disable_tqdm", value=lambda cfg: not cfg.progress),))
    max_nonfinite_updates: int = option(10, "stop after this many updates in a row whose every step had a "
                                            "non-finite loss or gradient (0: never)", count(0, MAX_STEPS),
                                       trl=(TRL(None, note="ladder skips (and counts) non-finite steps and stops "
                                                "after N in a row; TRL steps anyway"),))
    use_exercises: bool = option(False, "train with your implemented functions from exercises/ "
                                        "(or $LADDER_EXERCISES) in place of the core's",
                                 trl=(TRL(None, note="TRL computes the loss with its own code"),))

    def options(self) -> dict:
        """The options as their flags name them, flag → value: config.json (``options_dict``)."""
        return options_dict(self)


def options_dict(config) -> dict:
    """A config as flag → value: ``dataclasses.asdict`` with each field that holds a typed spec (``ladder.specs``)
    flattened into its flags, in ``layout``'s order."""
    values = {}
    for f in dataclasses.fields(config):
        spec = f.metadata.get("spec")
        if spec:
            values.update(spec.flat(config))
        else:
            values[f.name] = copy.deepcopy(getattr(config, f.name))
    return {name: values[name] for name in map(option_name, layout(type(config))) if name in values}


def layout(config_cls) -> list:
    """Every option of a config in the order ``--help``, config.json and --print-config list them: each plain field (a
    ``dataclasses.Field``) and each spec field's params (``ladder.specs.Param``) in the field's place — but a param its
    spec places before another option (``placed()``: flag → that option's name; a union's choice) there."""
    items, placed = [], {}
    for f in dataclasses.fields(config_cls):
        spec = f.metadata.get("spec")
        items += list(spec.params()) if spec else [f]
        placed.update(getattr(spec, "placed", dict)() if spec else {})
    for flag, before in placed.items():
        item = next(i for i in items if option_name(i) == flag)
        items.remove(item)
        items.insert(next(k for k, i in enumerate(items) if option_name(i) == before), item)
    return items


def option_name(item) -> str:
    """The option's name of a ``layout`` item: a param's flag, a field's name."""
    return getattr(item, "flag", None) or item.name


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


def _base_type(tp):
    if isinstance(tp, str):
        tp = eval(tp, vars(typing) | {"types": types})  # noqa: S307 - annotations of our own dataclasses
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if args else tp


def add_config_args(parser: argparse.ArgumentParser, config_cls, suppress_defaults: bool = False) -> None:
    """One ``--flag`` per option (``layout``). With ``suppress_defaults`` only the flags actually given are parsed."""
    for f in layout(config_cls):
        if not isinstance(f, dataclasses.Field):  # a spec's param
            _add_param_args(parser, [f], suppress_defaults)
            continue
        flags = ["--" + f.name.replace("_", "-"), *f.metadata.get("aliases", ())]
        kind = _base_type(f.type)
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
