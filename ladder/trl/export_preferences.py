"""Write a reward-model or dpo run as a runnable TRL script: the same model, pairs and options, trained by
``trl.RewardTrainer`` / ``trl.DPOTrainer`` instead of ``ladder.core.update``.

    python -m ladder.run reward-model --preset tiny --export-trl rm_trl.py     # writes the script, trains nothing
    python rm_trl.py --max-steps 2 --output-dir /tmp/rm-trl --device cpu
    python -m ladder.run dpo --preset tiny --export-trl dpo_trl.py

What maps, option by option, is ``ladder.trl.map``'s rows for the two configs (each with its value, declared by
the options, ``ladder.rungs.preference_options``): a ladder update of B pairs in M minibatches is M optimiser steps
of B / M pairs, so ``per_device_train_batch_size`` = B / M and ``max_steps`` = steps × M; the learning rate stays fixed
(``lr_scheduler_type="constant"``), AdamW without weight decay, the gradient norm clipped alike, no truncation
(``max_length=None``), float32 (``bf16=False``: TRL would otherwise run π_ref under bfloat16 autocast), dropout off
(TRL's default, as ladder). The script imports ladder for the pairs (the same ``train_and_held_out`` split) and for
the tiny model's path. What differs: ladder draws each update's B pairs at random from the training pairs, TRL walks
through them epoch by epoch in a shuffled order; TRL's evaluation is its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from ladder.tasks import preference_pairs, review_models

TRAINERS = {"reward-model": ("RewardTrainer", "RewardConfig", "SEQ_CLS"),
            "dpo": ("DPOTrainer", "DPOConfig", "CAUSAL_LM")}

SCRIPT = '''"""{rung} as TRL runs it: trl.{trainer} with the options of a ladder run ({command}).

Written by ladder's --export-trl (ladder.trl.export_preferences); TRL {trl_version} was installed where it was written.
    python {name} [--max-steps N] [--output-dir DIR] [--device cpu|cuda]
"""

import argparse

from datasets import Dataset
from peft import LoraConfig
from trl import {trainer}, {config_class}

from ladder.tasks import preference_pairs, review_models

MODEL = review_models.resolve_review_model({model!r})   # 'tiny': the tiny review GPT-2 ladder ships
DATASET, EVAL_PAIRS, MAX_PAIRS = {dataset!r}, {eval_pairs!r}, {max_pairs!r}
CONFIG = {{
{fields}}}
PEFT_CONFIG = {peft}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=CONFIG["max_steps"])
    parser.add_argument("--output-dir", default={output_dir!r})
    parser.add_argument("--device", choices=("cpu", "cuda"), default={device!r})
    args = parser.parse_args(argv)
    train, _ = preference_pairs.train_and_held_out(DATASET, EVAL_PAIRS, MAX_PAIRS)   # ladder's split
    config = {config_class}(**{{**CONFIG, "max_steps": args.max_steps, "output_dir": args.output_dir,
                             "use_cpu": args.device == "cpu"}})
    trainer = {trainer}(model=MODEL, args=config, train_dataset=Dataset.from_list(train), peft_config=PEFT_CONFIG)
    trainer.train()
    trainer.save_model(config.output_dir)


if __name__ == "__main__":
    main()
'''


def _source(row) -> str:
    """The comment of a field: the ladder option it comes from, and the row's note."""
    option = f"--{row.ladder_option.replace('_', '-')}" if row.ladder_option else ""
    return ": ".join(part for part in (option, row.note) if part)


def fields(cfg, rung: str) -> dict[str, tuple[object, str]]:
    """The trainer config's fields, from ``ladder.trl.map``'s rows of this rung: name → (value, its comment)."""
    from ladder.trl import map as trl_map

    rows = trl_map.rows(TRAINERS[rung][1])
    return {row.trl_field: (row.value(cfg), _source(row)) for row in rows if row.value is not None}


def script(cfg, rung: str, path: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    trainer, config_class, task_type = TRAINERS[rung]
    try:
        trl_version = version("trl")
    except PackageNotFoundError:
        trl_version = "(not installed)"
    lines = "".join(f"    {name!r}: {value!r},  # {source}\n" for name, (value, source) in fields(cfg, rung).items())
    peft = (f'LoraConfig(r={cfg.lora_r}, lora_alpha={cfg.lora_alpha}, target_modules="all-linear", '
            f'task_type="{task_type}")' if cfg.lora else "None")
    return SCRIPT.format(rung=rung, trainer=trainer, config_class=config_class, command=f"python -m ladder.run {rung}",
                         trl_version=trl_version, name=Path(path).name, model=cfg.model, dataset=cfg.dataset,
                         eval_pairs=cfg.eval_pairs, max_pairs=cfg.max_pairs or None, fields=lines, peft=peft,
                         output_dir=f"{cfg.out or 'runs/' + rung}-trl", device=cfg.device.split(":")[0])


def write(cfg, rung: str, path: str | os.PathLike) -> dict:
    """Write the script for ``cfg`` to ``path``; a summary like a run's (nothing is trained). The pairs are read
    first where they are local ('tiny', a file, a directory), so that a bad file is one line now; so is a ``path``
    that cannot take the script (a directory, a place that cannot be written: grpo's ``write_whole``)."""
    from ladder.trl.export import write_whole

    if cfg.dataset == "tiny" or Path(cfg.dataset).exists():
        preference_pairs.train_and_held_out(cfg.dataset, cfg.eval_pairs, cfg.max_pairs or None)
    review_models.resolve_review_model(cfg.model)
    write_whole(path, script(cfg, rung, str(path)), example=f"{rung.replace('-', '_')}_trl.py")
    trainer = TRAINERS[rung][0]
    return {"rung": rung, "export_trl": str(path), "model": cfg.model, "trainer": f"trl.{trainer}",
            "max_steps": cfg.steps * cfg.num_minibatches}


def write_reward_model(cfg, path: str | os.PathLike) -> dict:
    """``reward-model --export-trl FILE``: the run as a ``RewardTrainer`` script (``write``)."""
    return write(cfg, "reward-model", path)


def write_dpo(cfg, path: str | os.PathLike) -> dict:
    """``dpo --export-trl FILE``: the run as a ``DPOTrainer`` script (``write``)."""
    return write(cfg, "dpo", path)
