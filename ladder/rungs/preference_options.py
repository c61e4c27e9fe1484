"""The options both preference rungs share (``reward-model``, ``dpo``), declared once, and the rule between them (the
minibatches); what their runs share around the recipe (``train``, ``PairRecipe``) is ``preference_recipe``'s.

A rung's ``Config`` inherits the options and re-declares a field only to give it its own default or help (the model,
the batch, the learning rate).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.cli import (
    MAX_EXAMPLES,
    MAX_LORA_ALPHA,
    MAX_ROWS,
    MAX_SCALE,
    MAX_STEPS,
    RunOptions,
    Text,
    count,
    int_range,
    learning_rate,
    option,
    positive,
)
from ladder.rungs.protocol import check_minibatches
from ladder.tasks import preference_pairs

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
    steps: int = option(500, "updates (each one batch of pairs)", count(1, MAX_STEPS))
    batch_size: int = option(32, "pairs per update B (at most 65536)", int_range(1, 65536))
    num_minibatches: int = option(1, "shuffled minibatches of whole pairs per update (each one optimiser step)",
                                  count(1, MAX_ROWS))
    lr: float = option(1e-5, "AdamW learning rate", learning_rate())
    max_grad_norm: float | None = option(1.0, "gradient-norm clip", positive(MAX_SCALE))
    eval_every: int = option(50, "evaluate on the held-out pairs every N updates", count(1, MAX_STEPS))
    forward_batch_size: int = option(32, "pairs per gradient-free forward (π_ref, the evaluation)", count(1, MAX_ROWS))
    threads: int = option(0, "torch CPU threads (0: torch's default; at most 1024)", int_range(0, 1024))
    export_trl: str | None = option(None, "write this run as a runnable TRL script (reward-model: trl.RewardTrainer; "
                                          "dpo: trl.DPOTrainer) to this file and exit: nothing is trained, no run "
                                          "directory is created", Text())


def validate(cfg: PreferenceOptions) -> None:
    check_minibatches(cfg.batch_size, cfg.num_minibatches, f"a batch of {cfg.batch_size} pairs")
