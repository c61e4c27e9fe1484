"""Write a grpo run as a runnable TRL script: the same model, data, prompts, rewards and options, trained by
``trl.GRPOTrainer`` instead of ``ladder.core.update``.

Usage::

    python -m ladder.run grpo --preset tiny --qlora --export-trl grpo_trl.py   # writes the script, trains nothing
    python grpo_trl.py                                  # trains with TRL, saves the adapter in OUT-trl
    python grpo_trl.py --max-steps 2 --output-dir /tmp/trl-run --device cpu
    python grpo_trl.py --set per_device_train_batch_size=8 --set logging_steps=10   # any GRPOConfig field
    accelerate launch grpo_trl.py --device cuda         # several GPUs (per_device_train_batch_size ÷ WORLD_SIZE)

Any grpo flag works with ``--export-trl`` (``--algo dapo``, ``--reward-funcs correctness,my.py:fn``,
``--dataset rows.jsonl``, …); the options are checked as for a run, and no model is loaded and no run
directory is created (``@tiny-math`` is built into ladder's cache first if it is not there yet). In
Python: ``export_trl.write(grpo.Config(...), "grpo_trl.py")`` (``grpo.train`` only trains).

The agent rung's ``--export-trl`` (``write_agent``) writes ``GRPOTrainer(environment_factory=ENV_CLASS)`` from the
same parts, with ``max_tool_calling_iterations`` = ``--max-tool-calls``; the script gets its problems and system
prompt from ``ladder.rungs.agent`` itself (``python -m ladder.run agent --preset tiny --export-trl agent_trl.py``).

The script's ``GRPOConfig`` comes from ``ladder.trl.map`` alone: every row with a value gives one field
and its comment (the ladder option, the ``ladder.core`` function, what differs). The options TRL cannot
reproduce are listed in a comment block, those this run really uses first. The script imports ladder
for the task's data, the system prompts and the built-in reward functions. It trains on the training
problems of ``ladder.tasks.math_problems.split``, the grpo rung's rule, so the problems it holds out are
those that ``python -m ladder.run eval`` (the command in its docstring) scores. A user's ``FILE.py:FN``
is imported with importlib from the path as given (relative paths: from the working directory, else
from the directory the export was made in).
"""

from __future__ import annotations

import copy
import os
import shlex
import textwrap
from contextlib import suppress
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ladder import rewards
from ladder.rungs.agent import options as agent_options
from ladder.rungs.grpo.options import Config
from ladder.rungs.grpo.rules import validate
from ladder.rungs.grpo.settle import settle_known
from ladder.runtime.errors import UsageError
from ladder.specs import option_defaults, option_value, options_dict
from ladder.tasks import arithmetic, math_problems
from ladder.trl import map as trl_map
from ladder.trl.export_helpers import AGENT_HELPERS, HELPERS, TOOL_PARSING

DEVICES = ("cpu", "cuda")


def _trl_version() -> str:
    try:
        return version("trl")
    except PackageNotFoundError:
        return "not installed where exported"


def _device_type(device: str) -> str:
    return device.split(":")[0]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _comment(text: str, indent: str = "", width: int = 116) -> list[str]:
    """``text`` as comment lines: ``indent`` (spaces, or "#" plus spaces inside a comment block) then "# "."""
    first = f"{indent}# " if not indent.startswith("#") else indent
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=first + "  ",
                         break_long_words=False, break_on_hyphens=False)


def _row_comment(row: trl_map.Mapping) -> str:
    source = _flag(row.ladder_option) if row.ladder_option else "(no ladder flag)"
    core = f" · core.{row.core_function}" if row.core_function else ""
    return f"← {source}{core}" + (f": {row.note}" if row.note else "")


def config_values(cfg: Config) -> tuple[dict, dict]:
    """(GRPOConfig fields that do not depend on the device, device type → the fields that do), from the map."""
    by_device = {}
    for device in dict.fromkeys((*DEVICES, _device_type(cfg.device))):
        on = copy.copy(cfg)  # not dataclasses.replace: a CUDA script can be written on a machine without CUDA
        on.device = device
        by_device[device] = trl_map.trl_values(on)
    here = by_device[_device_type(cfg.device)]
    shared = {k: v for k, v in here.items() if all(k in d and d[k][0] == v[0] for d in by_device.values())}
    return shared, {d: {k: v for k, v in values.items() if k not in shared} for d, values in by_device.items()}


def _dict_lines(values: dict, indent: str) -> list[str]:
    lines = []
    for name, (value, row) in values.items():
        lines += _comment(_row_comment(row), indent)
        lines.append(f"{indent}{name}={value!r},")
    return lines


def _differences(cfg: Config, rungs: tuple[str, ...] = ("grpo",)) -> list[str]:
    """The comment block: ladder options of ``rungs`` TRL cannot reproduce (active here first), GRPOConfig names
    not set."""
    active, inactive = [], []
    for row in [r for rung in rungs for r in trl_map.not_in_trl(rung)]:
        (active if row.applies is not None and row.applies_to(cfg) else inactive).append(row)
    given = trl_map.trl_values(cfg)
    unset = list({r.trl_field: r for r in trl_map.rows("GRPOConfig")
                  if r.trl_field and r.trl_field not in given and r.ladder_rung in rungs}.values())
    lines = ["# " + "-" * 114, "# What TRL does differently, or not at all (ladder.trl.map).", "#"]
    lines.append("# Used by this run, and GRPOTrainer has no equivalent:" if active else
                 "# This run uses no ladder option that GRPOTrainer lacks.")
    for row in active:
        lines += _comment(f"{_flag(row.ladder_option)} = {option_value(cfg, row.ladder_option)!r}: {row.note}", "#   ")
    if cfg.reference_refresh is not None and (cfg.adapter.lora or cfg.adapter.qlora):
        lines += _comment(f"--ref-sync-every = {cfg.reference_refresh.every}: " + trl_map.for_field(
            "GRPOConfig", "sync_ref_model")[0].note, "#   ")
    lines += ["#", "# ladder options with no TRL equivalent, not used by this run (or bookkeeping only):"]
    for row in inactive:
        lines += _comment(f"{_flag(row.ladder_option)}: {row.note}", "#   ")
    lines += ["#", "# GRPOConfig fields left at TRL's default:"]
    for row in unset:
        lines += _comment(f"{row.trl_field} ({_row_comment(row)})", "#   ")
    lines += ["#", *_comment(f"The schedule: {trl_map.SCHEDULE}.", "# ")]
    return lines + ["# " + "-" * 114]


def _non_default_options(cfg: Config) -> list[str]:
    shown = []
    defaults = option_defaults(type(cfg))
    for name, value in options_dict(cfg).items():
        if name != "export_trl" and value != defaults[name]:
            shown.append(_flag(name) if value is True else f"--no-{name.replace('_', '-')}" if value is False
                         else f"{_flag(name)} {value}")
    return shown


def _system_prompt(cfg: Config) -> str:
    if cfg.problems.system_prompt:
        return repr(cfg.problems.system_prompt)
    return "arithmetic.TINY_SYSTEM_PROMPT" if cfg.problems.task == "arithmetic" else "arithmetic.SYSTEM_PROMPT"


def _problems_code(cfg: Config) -> list[str]:
    if cfg.problems.task == "arithmetic":
        dataset = "None"
    elif Path(cfg.problems.dataset).is_file():
        dataset = "str(local_path(DATASET))"
    else:
        dataset = "DATASET"
    return ['def train_problems() -> list[dict]:',
            '    """ladder\'s training problems, as the grpo rung splits them: EVAL_SIZE held out (a one-split file:',
            '    its last rows, at most a fifth), the first TRAIN_SIZE of the rest (0: all)."""',
            f'    train, _held_out = math_problems.split({cfg.problems.task!r}, {dataset}, EVAL_SIZE, TRAIN_SIZE)',
            '    return train']


def _rewards_code(cfg: Config) -> list[str]:
    lines = ["def reward_funcs() -> list:",
             '    """--reward-funcs in TRL\'s form, in the order of GRPO_CONFIG["reward_weights"]."""',
             "    return ["]
    for spec in [s.strip() for s in cfg.rewards.funcs.split(",") if s.strip()]:
        name = spec.rpartition(":")[2]
        if spec in arithmetic.REWARD_FUNCTIONS:
            fn = arithmetic.REWARD_FUNCTIONS[spec]
            lines.append(f"        for_trl({name!r}, arithmetic.{fn.__name__}),")
        else:
            lines.append(f"        for_trl({name!r}, load_user_function({spec!r})),")
    if cfg.rewards.overlong_buffer:
        cache = round(cfg.rewards.overlong_buffer * cfg.generation.max_new_tokens)
        lines.append(f"        get_soft_overlong_punishment(max_completion_len={cfg.generation.max_new_tokens}, "
                     f"soft_punish_cache={cache}),  # --overlong-buffer {cfg.rewards.overlong_buffer}")
    return lines + ["    ]"]


def _model_code(cfg: Config) -> list[str]:
    lines = []
    if cfg.adapter.qlora:
        lines += ["def quantization_config(device: str):",
                  '    """--qlora: the frozen base in 4-bit NormalFloat with double quantisation (bitsandbytes)."""',
                  "    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", "
                  "bnb_4bit_use_double_quant=True,",
                  "                              bnb_4bit_compute_dtype=torch.bfloat16 if device == \"cuda\" "
                  "else torch.float32)",
                  "", ""]
    else:
        lines += ["def quantization_config(device: str):", "    return None  # no --qlora: full-precision base", "",
                  ""]
    if cfg.adapter.qlora or cfg.adapter.lora:
        lines += ["# LoRA on every linear layer (--lora-r, --lora-alpha), as ladder.policies.quant.lora_config.",
                  f"PEFT_CONFIG = LoraConfig(r={cfg.adapter.r}, lora_alpha={cfg.adapter.alpha}, lora_dropout=0.0, "
                  "target_modules=\"all-linear\", task_type=\"CAUSAL_LM\",",
                  "                         bias=\"none\")"]
        if cfg.adapter.qlora:
            lines += ["# TRL casts a quantised model's LoRA weights to bfloat16 (the QLoRA paper); ladder keeps them "
                      "float32."]
    else:
        lines += ["PEFT_CONFIG = None  # no --lora/--qlora: every weight trains, π_ref is a frozen copy"]
    return lines


def _imports(cfg: Config, ladder_imports: tuple[str, ...] = ("from ladder.tasks import arithmetic, math_problems",)
             ) -> list[str]:
    imports = ["import argparse", "import ast", "import importlib", "import importlib.util", "import os", "import sys",
               "import warnings", "from pathlib import Path", "", "import torch", "from datasets import Dataset"]
    if cfg.adapter.qlora or cfg.adapter.lora:
        imports.append("from peft import LoraConfig")
    imports.append("from transformers import AutoTokenizer" + (", BitsAndBytesConfig" if cfg.adapter.qlora else ""))
    imports += ["try:", "    from trl import GRPOConfig, GRPOTrainer", "except ModuleNotFoundError as error:",
                '    if error.name != "trl":', "        raise",
                """    sys.exit('this script needs TRL: pip install "trl>=1.16,<2" (in a checkout of ladder: """
                """pip install -e ".[dev]")')"""]
    if cfg.rewards.overlong_buffer:
        imports.append("from trl.rewards import get_soft_overlong_punishment")
    return imports + ["", *ladder_imports, "",
                      "# TRL and peft still call transformers' gradient_checkpointing* names, which transformers 5.24",
                      "# renamed activation_checkpointing*: a warning about their code, not about this script.",
                      'warnings.filterwarnings("ignore", message=r"`\\w*gradient_checkpointing\\w*` is deprecated", '
                      'category=FutureWarning)']


def _config_code(cfg: Config) -> list[str]:
    """``GRPO_CONFIG`` and ``BY_DEVICE``: the map's values, each with its comment."""
    shared, by_device = config_values(cfg)
    config = ["# GRPOConfig, field by field from ladder.trl.map: the ladder option and core function behind each.",
              "GRPO_CONFIG = dict(", *_dict_lines(shared, "    "), ")", "",
              "# The fields that depend on the device (the script's --device picks one).", "BY_DEVICE = {"]
    for device, values in by_device.items():
        config += [f"    {device!r}: dict(", *_dict_lines(values, "        "), "    ),"]
    return config + ["}", ""]


def script(cfg: Config, exported_from: str | os.PathLike | None = None) -> str:
    """The text of the TRL script for ``cfg`` (a validated grpo ``Config``)."""
    flags = " ".join(_non_default_options(cfg)) or "(all defaults)"
    eval_cmd = (f"python -m ladder.run eval --model {shlex.quote(cfg.model)} --task {cfg.problems.task}"
                + (f" --dataset {shlex.quote(cfg.problems.dataset)}" if cfg.problems.task == "gsm8k" else "")
                + f" --eval-size {cfg.problems.eval_size} --max-new-tokens {cfg.generation.max_new_tokens}"
                + (f" --system-prompt {shlex.quote(cfg.problems.system_prompt)}" if cfg.problems.system_prompt else "")
                + (" --qlora" if cfg.adapter.qlora else "") + " --adapter OUTPUT_DIR")
    head = [
        "#!/usr/bin/env python",
        f'"""GRPO with TRL: ladder\'s grpo run, exported by `--export-trl` (ladder.trl.export; TRL {_trl_version()}).',
        "",
        "ladder options (those not at their default):",
        *textwrap.wrap(flags, 116, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False),
        "",
        "Run:",
        "    python THIS.py [--max-steps N] [--output-dir DIR] [--device cpu|cuda] [--set FIELD=VALUE ...]",
        "    accelerate launch THIS.py --device cuda",
        "",
        "Greedy accuracy as ladder measures it, on the problems held out of training (with a LoRA/QLoRA adapter):",
        f"    {eval_cmd}",
        '"""',
        "",
    ]
    constants = [
        "",
        f"MODEL = {math_problems.resolve_math_model(cfg.model)!r}"
        + ("  # --model @tiny-math, ladder's cached tiny model" if cfg.model == "@tiny-math" else ""),
        f"SYSTEM_PROMPT = {_system_prompt(cfg)}",
    ]
    if cfg.problems.task == "gsm8k":
        constants.append(f"DATASET = {cfg.problems.dataset!r}")
    constants += [
        f"EVAL_SIZE = {cfg.problems.eval_size}  # --eval-size: problems held out of training",
        f"TRAIN_SIZE = {cfg.problems.train_size}  # --train-size (0: all)",
        f"THREADS = {cfg.threads}  # --threads (0: torch's default)",
        f"DEVICE = {_device_type(cfg.device)!r}  # --device",
        f"EXPORTED_FROM = {str(Path(exported_from or Path.cwd()).resolve())!r}",
        "",
    ]
    body = [*_differences(cfg), "", "", *_problems_code(cfg), "", "", *_rewards_code(cfg), "", "",
            *_model_code(cfg), "", ""]
    return "\n".join(head + _imports(cfg) + constants + _config_code(cfg) + body) + HELPERS


def write(cfg: Config, path: str | os.PathLike) -> dict:
    """Write the script for ``cfg`` to ``path``; a summary like a run's (nothing is trained). The options are
    checked as for a run first: a missing ``FILE.py:FN``, and sizes that do not fit the data at hand (the
    arithmetic task, a local file; a hub dataset is loaded by the script) are one line now, as is ``path``."""
    validate(cfg)
    rewards.load_all(cfg.rewards.funcs)
    if cfg.problems.task == "arithmetic" or Path(cfg.problems.dataset).is_file():
        cfg.problems.split(cfg.prompts_per_step)
    write_whole(path, script(cfg))
    shared, _ = config_values(cfg)
    unsupported = [r.ladder_option for r in trl_map.not_in_trl("grpo") if r.applies is not None and r.applies_to(cfg)]
    return {"rung": "grpo", "export_trl": str(path), "model": cfg.model, "trainer": "trl.GRPOTrainer",
            "max_steps": shared["max_steps"][0], "not_in_trl": ", ".join(unsupported) or "none"}


# --- the agent rung: GRPOTrainer(environment_factory=…) ------------------------------------------------------


def _environment_code(cfg) -> tuple[list[str], list[str]]:
    """(its import, ``environment_class()``) for ``--env``: a built-in's import path, or a user's FILE.py:Class /
    MODULE:Class loaded by the script (loaded here first: one line if it cannot be)."""
    loaded = agent_options.environment(cfg)  # one line if it cannot be loaded
    if cfg.env in agent_options.ENVIRONMENTS:
        cls = loaded.__name__
        imports = [f"from {loaded.__module__} import {cls}"]
    else:
        imports, cls = [], f"load_user_function({cfg.env!r})"
    return imports, ["def environment_class() -> type:",
                     f'    """--env {cfg.env}: TRL makes one instance per trajectory, calls reset(**row), then its '
                     'tools."""', f"    return {cls}"]


def _agent_problems_code(cfg) -> list[str]:
    """The rung's options that pick the problems and the system prompt, and ``train_problems()``: the rung's own
    ``problems`` and ``system_prompt`` (ladder.rungs.agent), run by the script."""
    p = cfg.problems
    options = dict(env=cfg.env, task=p.task, dataset=p.dataset, eval_size=p.eval_size, train_size=p.train_size,
                   prompts_per_step=cfg.prompts_per_step, system_prompt=p.system_prompt)
    local = (cfg.env == "gsm8k" or cfg.env not in agent_options.ENVIRONMENTS) and Path(cfg.problems.dataset).is_file()
    given = '{**LADDER_OPTIONS, "dataset": str(local_path(LADDER_OPTIONS["dataset"]))}' if local else "LADDER_OPTIONS"
    return ["# The agent rung's options that pick its problems and its system prompt (ladder.rungs.agent).",
            "LADDER_OPTIONS = dict(", *[f"    {k}={v!r}," for k, v in options.items()], ")",
            "SYSTEM_PROMPT = agent.system_prompt(agent.Config(**LADDER_OPTIONS))", "", "",
            "def train_problems() -> list[dict]:",
            '    """ladder\'s training problems, as the agent rung draws them (ladder.rungs.agent.problems):',
            '    --eval-size held out, the first --train-size of the rest (0: all)."""',
            f"    train, _held_out = agent.problems(agent.Config(**{given}))", "    return train"]


def agent_script(cfg, exported_from: str | os.PathLike | None = None) -> str:
    """The text of the TRL script for an agent rung's ``cfg``: the grpo script's parts, the environment's class as
    ``environment_factory``, the rung's problems and system prompt, TRL's tool-call parsing."""
    env_import, env_code = _environment_code(cfg)
    flags = " ".join(_non_default_options(cfg)) or "(all defaults)"
    head = ["#!/usr/bin/env python",
            f'"""GRPO on tool use with TRL: ladder\'s agent run, exported by `--export-trl` (ladder.trl.export; TRL '
            f'{_trl_version()}).', "", "ladder options (those not at their default):",
            *textwrap.wrap(flags, 116, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False), "",
            "Run:", "    python THIS.py [--max-steps N] [--output-dir DIR] [--device cpu|cuda] [--set FIELD=VALUE ...]",
            '"""', ""]
    imports = _imports(cfg, ("from trl.chat_template_utils import add_response_schema, qwen3_template", "",
                             "from ladder.rungs import agent", "from ladder.tasks import arithmetic", *env_import))
    tiny = f"  # --model {cfg.model}, ladder's tiny model" if cfg.model in agent_options.TINY_MODELS else ""
    constants = ["", f"MODEL = {agent_options.model_path(cfg)!r}" + tiny,
                 f"THREADS = {cfg.threads}  # --threads (0: torch's default)",
                 f"DEVICE = {_device_type(cfg.device)!r}  # --device",
                 f"EXPORTED_FROM = {str(Path(exported_from or Path.cwd()).resolve())!r}", ""]
    body = [*_differences(cfg, ("grpo", "agent")), "", "", *_agent_problems_code(cfg), "", "", *env_code, "", "",
            *_rewards_code(cfg), "", "", *_model_code(cfg), "", ""]
    return "\n".join(head + imports + constants + _config_code(cfg) + body) + TOOL_PARSING + AGENT_HELPERS


def write_agent(cfg, path: str | os.PathLike) -> dict:
    """Write the agent rung's run as a TRL script, ``GRPOTrainer(environment_factory=…)``; a summary as ``write``'s.
    GRPO's options are checked as for a run, the environment and the reward functions loaded (one line if not)."""
    agent_options.validate(cfg)
    rewards.load_all(cfg.rewards.funcs)
    if (cfg.env == "gsm8k" or cfg.env not in agent_options.ENVIRONMENTS) and Path(cfg.problems.dataset).is_file():
        task = "gsm8k" if cfg.env == "gsm8k" else cfg.problems.task
        cfg.problems.split(cfg.prompts_per_step, task)
    write_whole(path, agent_script(cfg), example="agent_trl.py")
    shared, _ = config_values(cfg)
    unsupported = [r.ladder_option for rung in ("grpo", "agent") for r in trl_map.not_in_trl(rung)
                   if r.applies is not None and r.applies_to(cfg)]
    return {"rung": "agent", "export_trl": str(path), "model": cfg.model, "env": cfg.env,
            "trainer": "trl.GRPOTrainer(environment_factory=…)", "max_steps": shared["max_steps"][0],
            "not_in_trl": ", ".join(unsupported) or "none"}


def write_whole(path: str | os.PathLike, text: str, example: str = "grpo_trl.py") -> None:
    """``text`` into ``path`` through a temporary file beside it, making missing parent directories. A directory,
    or a place that cannot be written, is one line (``example``: a file name it suggests), and nothing is left
    behind (no partial file, no new folder)."""
    target = Path(path)
    if target.is_dir() or str(path).endswith(("/", os.sep)):
        raise UsageError(f"--export-trl {path} is a directory; give a file name for the script, such as {example}")
    if any(parent.exists() and not parent.is_dir() for parent in target.parents):
        raise UsageError(f"--export-trl {path}: a parent of it is a file, not a directory")
    made, tmp = [p for p in target.parents if not p.exists()], target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        os.replace(tmp, target)
    except OSError as e:
        with suppress(OSError):  # the partial file, then the folders made for it, the deepest first
            tmp.unlink(missing_ok=True)
            for directory in made:
                directory.rmdir()
        raise UsageError(f"--export-trl {path}: cannot write there ({e.strerror or type(e).__name__})") from None


def write_grpo(cfg: Config, path: str | os.PathLike) -> dict:
    """``grpo --export-trl FILE``: the run, its ``auto``s settled as the run would settle them (``settle_known``), as a
    ``GRPOTrainer`` script; nothing trained, no run directory. Its summary."""
    return write(settle_known(cfg).cfg, path)


def write_agent_run(cfg, path: str | os.PathLike) -> dict:
    """``agent --export-trl FILE``: the run, settled, as a ``GRPOTrainer(environment_factory=…)`` script."""
    return write_agent(settle_known(cfg).cfg, path)
