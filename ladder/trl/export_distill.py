"""Write a distill run as a runnable TRL script: the same student, teacher, problems and prompts, trained by
``trl.experimental.gkd.GKDTrainer`` instead of ``ladder.core.update``.

    python -m ladder.run distill --preset tiny --export-trl distill_trl.py   # writes the script, trains nothing
    python distill_trl.py --max-steps 2 --output-dir /tmp/distill-trl --device cpu
    python distill_trl.py --set per_device_train_batch_size=8                # any GKDConfig field

What maps is ``ladder.trl.map``'s rows of the distill rung (``ladder.rungs.distill.options`` declares them): GKD on
the student's own samples (``lmbda`` = 1, ladder samples every update) with the reverse KL to the teacher at each
position (``beta`` = 1), which is the gradient ladder's per-token rewards estimate at ``--discount 0``; the teacher
(``teacher_model_name_or_path``), ``temperature``, ``max_new_tokens``, the optimiser, the steps and batch sizes, LoRA
as grpo's script maps them. What does not: γ > 0 (ladder's credit of the teacher's later rewards, γ = 1 the whole
completion's reverse KL) has no GKD setting; GKD's loss is direct, so the clipped surrogate, μ and π_old have no
counterpart; it has no rule rewards, no π_ref, no groups. The script's comment block lists them, those the run uses
first. It imports ladder for the problems and the system prompt, and trains on the training problems of the grpo
rung's split (``ladder.tasks.math_problems.split``): those it holds out are the ones ``python -m ladder.run eval``
scores. A GKDTrainer quirk is mended: it divides the summed divergence by the tokens the student sampled, not by the
dataset's reference answers' (``main``'s comment).
"""

from __future__ import annotations

import copy
import os
import re
import textwrap
from pathlib import Path

from ladder.options import layout, option_name
from ladder.rungs.distill.options import Config, validate
from ladder.rungs.grpo.settle import settle_known
from ladder.specs import option_defaults, option_value
from ladder.tasks import math_problems
from ladder.trl import map as trl_map
from ladder.trl.export import (
    DEVICES,
    _comment,
    _device_type,
    _dict_lines,
    _flag,
    _model_code,
    _non_default_options,
    _problems_code,
    _row_comment,
    _system_prompt,
    _trl_version,
    write_whole,
)
from ladder.trl.export_helpers import HELPERS
from ladder.trl_rows import GKD

RUNG = "distill"
SCHEDULE = ("ladder: each update samples G completions for each of P prompts from the student, scores every token "
            "with the teacher, and makes μ passes over them in M minibatches, one optimiser step each. GKD: each "
            "optimiser step samples per_device_train_batch_size completions from the student, one per prompt, and "
            "takes the divergence to the teacher on them. With μ = 1 and M = 1 both take one step per P·G sampled "
            "completions")


def config_values(cfg: Config) -> tuple[dict, dict]:
    """(GKDConfig fields that do not depend on the device, device type → the fields that do), from the map."""
    by_device = {}
    for device in dict.fromkeys((*DEVICES, _device_type(cfg.device))):
        on = copy.copy(cfg)  # not dataclasses.replace: a CUDA script can be written on a machine without CUDA
        on.device = device
        by_device[device] = trl_map.trl_values(on, GKD)
    here = by_device[_device_type(cfg.device)]
    shared = {k: v for k, v in here.items() if all(k in d and d[k][0] == v[0] for d in by_device.values())}
    return shared, {d: {k: v for k, v in values.items() if k not in shared} for d, values in by_device.items()}


def unmapped(cfg: Config) -> tuple[list[str], list[str]]:
    """grpo's options GKDTrainer has nothing for (no row of the rung's at all): (those this run sets away from their
    default, the others)."""
    mapped, defaults = trl_map.ladder_options(RUNG), option_defaults(type(cfg))
    names = [option_name(item) for item in layout(type(cfg)) if option_name(item) not in mapped]
    used = [n for n in names if option_value(cfg, n) != defaults[n]]  # a union's unheld flag: its default
    return used, [n for n in names if n not in used]


def _differences(cfg: Config) -> list[str]:
    """The comment block: the options GKDTrainer cannot reproduce (those this run uses first), GKDConfig names not
    set, the schedules side by side."""
    active, inactive = [], []
    for row in trl_map.not_in_trl(RUNG):
        (active if row.applies is not None and row.applies_to(cfg) else inactive).append(row)
    used, unused = unmapped(cfg)
    given = trl_map.trl_values(cfg, GKD)
    unset = list({r.trl_field: r for r in trl_map.rows(GKD)
                  if r.trl_field and r.trl_field not in given and r.ladder_rung == RUNG}.values())
    lines = ["# " + "-" * 114, "# What TRL does differently, or not at all (ladder.trl.map).", "#"]
    lines.append("# Used by this run, and GKDTrainer has no equivalent:" if active or used else
                 "# This run uses no ladder option that GKDTrainer lacks.")
    for row in active:
        lines += _comment(f"{_flag(row.ladder_option)} = {option_value(cfg, row.ladder_option)!r}: {row.note}",
                          "#   ")
    if used:
        lines += _comment("grpo's options, which GKDTrainer has nothing for: " + ", ".join(
            f"{_flag(n)} {option_value(cfg, n)!r}" for n in used), "#   ")
    lines += ["#", "# ladder options with no TRL equivalent, not used by this run (or bookkeeping only):"]
    for row in inactive:
        lines += _comment(f"{_flag(row.ladder_option)}: {row.note}", "#   ")
    lines += _comment("grpo's options GKDTrainer has nothing for, at their defaults here: "
                      + ", ".join(map(_flag, unused)), "#   ")
    lines += ["#", "# GKDConfig fields left at TRL's default:"]
    for row in unset:
        lines += _comment(f"{row.trl_field} ({_row_comment(row)})", "#   ")
    lines += ["#", *_comment(f"The schedule: {SCHEDULE}.", "# ")]
    return lines + ["# " + "-" * 114]


def _dataset_code(cfg: Config) -> list[str]:
    """``train_problems()`` (grpo's split) and ``train_dataset()``: GKD's chat rows, the problem's reference answer
    as the assistant turn (the collator needs one; at lmbda = 1 the student's sample replaces it)."""
    return [*_problems_code(cfg), "", "",
            "def train_dataset() -> Dataset:",
            '    """One chat per problem: the system prompt, the question, the reference answer."""',
            "    return Dataset.from_list([",
            '        {"messages": [{"role": "system", "content": SYSTEM_PROMPT},',
            '                      {"role": "user", "content": p["question"]},',
            '                      {"role": "assistant", "content": p.get("solution") or f"#### {p[\'answer\']}"}]}',
            "        for p in train_problems()])"]


def _imports(cfg: Config) -> list[str]:
    imports = ["import argparse", "import ast", "import os", "import sys", "import warnings",
               "from pathlib import Path", "", "import torch", "from datasets import Dataset"]
    if cfg.adapter.qlora or cfg.adapter.lora:
        imports.append("from peft import LoraConfig")
    imports.append("from transformers import AutoTokenizer" + (", BitsAndBytesConfig" if cfg.adapter.qlora else ""))
    imports += ["try:", "    from trl.experimental.gkd import GKDConfig, GKDTrainer",
                "except ModuleNotFoundError as error:",
                '    if error.name not in ("trl", "trl.experimental", "trl.experimental.gkd"):', "        raise",
                """    sys.exit('this script needs TRL: pip install "trl>=1.16,<2" (in a checkout of ladder: """
                """pip install -e ".[dev]")')""", "",
                "from ladder.tasks import arithmetic, math_problems", "",
                "# TRL and peft still call transformers' gradient_checkpointing* names, which transformers 5.24",
                "# renamed activation_checkpointing*: a warning about their code, not about this script.",
                'warnings.filterwarnings("ignore", message=r"`\\w*gradient_checkpointing\\w*` is deprecated", '
                'category=FutureWarning)']
    return imports


def _config_code(cfg: Config) -> list[str]:
    """``GKD_CONFIG`` and ``BY_DEVICE``: the map's values, each with its comment."""
    shared, by_device = config_values(cfg)
    config = ["# GKDConfig, field by field from ladder.trl.map: the ladder option and core function behind each.",
              "GKD_CONFIG = dict(", *_dict_lines(shared, "    "), ")", "",
              "# The fields that depend on the device (the script's --device picks one).", "BY_DEVICE = {"]
    for device, values in by_device.items():
        config += [f"    {device!r}: dict(", *_dict_lines(values, "        "), "    ),"]
    return config + ["}", ""]


def script(cfg: Config, exported_from: str | os.PathLike | None = None) -> str:
    """The text of the GKD script for ``cfg`` (a validated, settled distill ``Config``)."""
    flags = " ".join(_non_default_options(cfg)) or "(all defaults)"
    head = ["#!/usr/bin/env python",
            f'"""On-policy distillation with TRL\'s GKD: ladder\'s distill run, exported by `--export-trl` '
            f"(ladder.trl.export_distill; TRL {_trl_version()}).", "", "ladder options (those not at their default):",
            *textwrap.wrap(flags, 116, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False), "",
            "Run:", "    python THIS.py [--max-steps N] [--output-dir DIR] [--device cpu|cuda] [--set FIELD=VALUE ...]",
            "    accelerate launch THIS.py --device cuda", '"""', ""]
    tiny = {math_problems.TINY_MODEL: "  # --model @tiny-math, ladder's cached tiny model"}
    constants = ["", f"MODEL = {math_problems.resolve_math_model(cfg.model)!r}" + tiny.get(cfg.model, ""),
                 f"SYSTEM_PROMPT = {_system_prompt(cfg)}"]
    if cfg.problems.task == "gsm8k":
        constants.append(f"DATASET = {cfg.problems.dataset!r}")
    constants += [f"EVAL_SIZE = {cfg.problems.eval_size}  # --eval-size: problems held out of training",
                  f"TRAIN_SIZE = {cfg.problems.train_size}  # --train-size (0: all)",
                  f"THREADS = {cfg.threads}  # --threads (0: torch's default)",
                  f"DEVICE = {_device_type(cfg.device)!r}  # --device",
                  f"EXPORTED_FROM = {str(Path(exported_from or Path.cwd()).resolve())!r}", ""]
    model = [line.replace(", π_ref is a frozen copy", "") for line in _model_code(cfg)]  # GKD has no π_ref
    body = [*_differences(cfg), "", "", *_dataset_code(cfg), "", "", *model, "", ""]
    return "\n".join(head + _imports(cfg) + constants + _config_code(cfg) + body) + helpers()


def _helper(name: str) -> str:
    """One function of grpo's script (``export_helpers.HELPERS``), as written there."""
    found = re.search(rf"^def {name}\(.*?(?=^def |^if __name__)", HELPERS, re.MULTILINE | re.DOTALL)
    if found is None:
        raise LookupError(f"export_helpers.HELPERS has no function {name}")
    return found.group(0)


def helpers() -> str:
    """The script's functions: grpo's script's ``local_path`` and ``literal``, then the GKDConfig from the command
    line and ``main``."""
    return "\n" + _helper("local_path") + _helper("literal") + GKD_MAIN


GKD_MAIN = '''def gkd_config(args) -> GKDConfig:
    kwargs = {**GKD_CONFIG, **BY_DEVICE[args.device]}
    world = int(os.environ.get("WORLD_SIZE", "1"))  # ladder's --prompts-per-step is a total over all processes
    if kwargs["per_device_train_batch_size"] % world:
        sys.exit(f"per_device_train_batch_size {kwargs['per_device_train_batch_size']} cannot be shared by "
                 f"{world} processes")
    kwargs["per_device_train_batch_size"] //= world
    if args.max_steps is not None:
        kwargs["max_steps"] = args.max_steps
    if args.output_dir is not None:
        kwargs["output_dir"] = args.output_dir
    for item in args.set:
        name, _, text = item.partition("=")
        kwargs[name.strip()] = literal(text.strip())
    quantization = quantization_config(args.device)
    if quantization is not None:  # GKDTrainer takes no quantization_config: the student loads with it
        kwargs["model_init_kwargs"] = {**(kwargs.get("model_init_kwargs") or {}), "quantization_config": quantization}
    if "activation_checkpointing" in GKDConfig.__dataclass_fields__:  # transformers >= 5.24's name for it
        kwargs["activation_checkpointing"] = kwargs.pop("gradient_checkpointing")
    return GKDConfig(**kwargs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, help=f"optimiser steps (default {GKD_CONFIG['max_steps']})")
    parser.add_argument("--output-dir", help=f"default {GKD_CONFIG['output_dir']}")
    parser.add_argument("--device", choices=tuple(BY_DEVICE), default=DEVICE, help=f"default {DEVICE}")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="any GKDConfig field (a Python literal, else text); repeatable")
    args = parser.parse_args(argv)
    if THREADS:
        torch.set_num_threads(THREADS)
    config = gkd_config(args)
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:  # as ladder: pad with EOS (padding is masked out)
        tokenizer.pad_token = tokenizer.eos_token
    trainer = GKDTrainer(model=MODEL, teacher_model=config.teacher_model_name_or_path, args=config,
                         train_dataset=train_dataset(), processing_class=tokenizer, peft_config=PEFT_CONFIG)
    # Without this, GKDTrainer divides the summed divergence by the token count of the dataset's reference answers
    # (transformers' num_items_in_batch, counted before the student's samples replace them); with it, by the tokens
    # the student sampled: the token mean of its loss (ladder's --loss-type bnpo).
    trainer.model_accepts_loss_kwargs = False
    if config.use_cpu:
        # bitsandbytes repacks 4-bit weights for fast CPU inference on a no-grad forward in eval mode (CPUs with
        # AVX512-BF16); a later forward with gradients then fails. Keep the training layout (ladder.policies.quant).
        for module in trainer.model.modules():
            if hasattr(module, "support_avx512bf16_for_cpu"):
                module.support_avx512bf16_for_cpu = False
    trainer.train()
    trainer.save_model(config.output_dir)  # the adapter with --lora/--qlora, else the model


if __name__ == "__main__":
    main()
'''


def write(cfg: Config, path: str | os.PathLike) -> dict:
    """Write the script for ``cfg`` to ``path``; a summary like a run's (nothing is trained). The options are checked
    as for a run first; the problems are split where they are at hand (the arithmetic task, a local file), the tiny
    models found or built; a ``path`` that cannot take the script is one line (grpo's ``write_whole``)."""
    validate(cfg)
    if cfg.problems.task == "arithmetic" or Path(cfg.problems.dataset).is_file():
        cfg.problems.split(cfg.prompts_per_step)
    write_whole(path, script(cfg), example="distill_trl.py")
    shared, _ = config_values(cfg)
    unsupported = [r.ladder_option for r in trl_map.not_in_trl(RUNG) if r.applies is not None and r.applies_to(cfg)]
    unsupported += unmapped(cfg)[0]
    return {"rung": RUNG, "export_trl": str(path), "model": cfg.model, "teacher": cfg.teacher,
            "trainer": "trl.experimental.gkd.GKDTrainer", "max_steps": shared["max_steps"][0],
            "not_in_trl": ", ".join(unsupported) or "none"}


def write_distill(cfg: Config, path: str | os.PathLike) -> dict:
    """``distill --export-trl FILE``: the run, its ``auto``s settled as the run would settle them, as a
    ``GKDTrainer`` script; nothing trained, no run directory. Its summary."""
    return write(settle_known(cfg).cfg, path)
