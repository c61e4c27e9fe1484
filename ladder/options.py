"""Options from dataclasses: every hyperparameter is a ``--flag`` with its default, help and domain.

An option declares, once, its default, its help, what values it accepts (``ladder.domains``: ``option(default, help,
domain)``) and its names in TRL (``trl=``). Every config checks its fields on construction — from the command line
(one line, exit code 2) and from Python (``ValueError`` naming the field and its domain) alike; a rung's
``validate()`` keeps only the rules that relate several options. ``layout`` is the order ``--help``, config.json and
--print-config list a config's options in (a spec's flags in its field's place); the command line itself is
``ladder.cli``'s.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from dataclasses import dataclass, field

from ladder.domains import (
    MAX_STEPS,
    Device,
    Flag,
    OneOf,
    PathKind,
    count,
    int_range,
    outside_domain,
)
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
    if base_type(f.type) is bool:
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
        if before not in map(option_name, items):
            continue  # a config without that option: the param stays put
        item = next(i for i in items if option_name(i) == flag)
        items.remove(item)
        items.insert(next(k for k, i in enumerate(items) if option_name(i) == before), item)
    return items


def option_name(item) -> str:
    """The option's name of a ``layout`` item: a param's flag, a field's name."""
    return getattr(item, "flag", None) or item.name


def base_type(tp):
    """The type of a field's annotation, None taken out (``int | None`` → int)."""
    if isinstance(tp, str):
        tp = eval(tp, vars(typing) | {"types": types})  # noqa: S307 - annotations of our own dataclasses
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if args else tp
