"""The options both preference rungs share (``reward-model``, ``dpo``), declared once, and the rule between them (the
minibatches); what their runs share around the recipe (``train``, ``PairRecipe``) is ``preference_recipe``'s.

A rung's ``Config`` inherits the options and re-declares a field only to give it its own default or help (the model,
the batch, the learning rate).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import (
    MAX_EXAMPLES,
    MAX_LORA_ALPHA,
    MAX_ROWS,
    MAX_SCALE,
    MAX_STEPS,
    Text,
    count,
    int_range,
    learning_rate,
    positive,
)
from ladder.options import RunOptions, option
from ladder.rungs.protocol import check_minibatches
from ladder.tasks import preference_pairs
from ladder.trl_rows import PAIRS, SAME, TRL, const

# TRL's RewardConfig and DPOConfig (``ladder.trl.export_preferences`` writes them): a ladder update of B pairs in M
# minibatches is M optimiser steps of B / M pairs, so per_device_train_batch_size is B / M and max_steps is --steps × M.
BATCH_TRL = (TRL("per_device_train_batch_size", "update", "pairs per optimiser step: --batch-size ÷ --num-minibatches",
                 lambda cfg: cfg.batch_size // cfg.num_minibatches, cls=PAIRS),)
LR_TRL = (TRL("learning_rate", value=SAME, cls=PAIRS),)


def trl_settings(cls: str, loss: str) -> tuple[TRL, ...]:
    """The settings of ``cls`` (RewardConfig, DPOConfig) ladder has no flag for: its learning rate stays fixed, its
    AdamW has no weight decay, it does not truncate, trains in float32 (TRL's default bf16 would run π_ref under
    bfloat16 autocast on a CPU) and turns dropout off, as TRL does by default; ``loss``: the rung's core loss."""
    return (
        TRL("lr_scheduler_type", note="ladder's learning rate stays fixed", value=const("constant"), cls=cls),
        TRL("warmup_steps", note="no warm-up in ladder", value=const(0), cls=cls),
        TRL("weight_decay", note="ladder's AdamW has none", value=const(0.0), cls=cls),
        TRL("max_length", note="ladder does not truncate", value=const(None), cls=cls),
        TRL("bf16", loss, "float32, as ladder (TRL's default bf16 would run the reference under bfloat16 autocast on "
            "a CPU)", const(False), cls=cls),
        TRL("disable_dropout", note="as ladder", value=const(True), cls=cls),
        TRL("report_to", note="no tracker", value=const("none"), cls=cls),
    )

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # the model of TRL's RewardTrainer and DPOTrainer examples


@dataclass
class PreferenceOptions(RunOptions):
    model: str = option(DEFAULT_MODEL, "hub id or directory ('tiny': the project's tiny review GPT-2)", Text())
    dataset: str = option(preference_pairs.DEFAULT_DATASET, "preference pairs: hub dataset id, a local .jsonl/.json "
                                                            "file of prompt/chosen/rejected rows, or 'tiny' (the "
                                                            "tiny preference task shipped with ladder)", Text())
    max_pairs: int = option(0, "train on at most this many pairs of --dataset (0: all)", count(0, MAX_EXAMPLES))
    eval_pairs: int = option(200, "held-out pairs scored at each evaluation (a local file's last rows; else its "
                                  "test split)", count(0, MAX_EXAMPLES))
    lora: bool = option(False, "LoRA adapters on the backbone (reward-model: the scalar head trains whole and the "
                               "adapters are merged on save; dpo: π_ref is the base with the adapter off)")
    lora_r: int = option(16, "LoRA rank r", int_range(1, 4096))
    lora_alpha: int = option(32, "LoRA α (at most 65536)", count(1, MAX_LORA_ALPHA))
    steps: int = option(500, "updates (each one batch of pairs)", count(1, MAX_STEPS),
                        trl=(TRL("max_steps", note="optimiser steps: --steps × --num-minibatches",
                                 value=lambda cfg: cfg.steps * cfg.num_minibatches, cls=PAIRS),))
    batch_size: int = option(32, "pairs per update B (at most 65536)", int_range(1, 65536), trl=BATCH_TRL)
    num_minibatches: int = option(1, "shuffled minibatches of whole pairs per update (each one optimiser step)",
                                  count(1, MAX_ROWS))
    lr: float = option(1e-5, "AdamW learning rate", learning_rate(), trl=LR_TRL)
    max_grad_norm: float | None = option(1.0, "gradient-norm clip", positive(MAX_SCALE),
                                         trl=(TRL("max_grad_norm", "update", "0: no clipping",
                                                  lambda cfg: 0.0 if cfg.max_grad_norm is None else cfg.max_grad_norm,
                                                  cls=PAIRS),))
    eval_every: int = option(50, "evaluate on the held-out pairs every N updates", count(1, MAX_STEPS),
                             trl=(TRL("logging_steps", note="TRL logs its own training statistics", value=SAME,
                                      cls=PAIRS),))
    forward_batch_size: int = option(32, "pairs per gradient-free forward (π_ref, the evaluation)", count(1, MAX_ROWS))
    threads: int = option(0, "torch CPU threads (0: torch's default; at most 1024)", int_range(0, 1024))
    export_trl: str | None = option(None, "write this run as a runnable TRL script (reward-model: trl.RewardTrainer; "
                                          "dpo: trl.DPOTrainer) to this file and exit: nothing is trained, no run "
                                          "directory is created", Text())


def validate(cfg: PreferenceOptions) -> None:
    check_minibatches(cfg.batch_size, cfg.num_minibatches, f"a batch of {cfg.batch_size} pairs")
